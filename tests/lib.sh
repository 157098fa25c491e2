# shellcheck shell=bash
# tests/lib.sh: helpers of the shell tests (run_path.sh, install.sh,
# package.sh), sourced by them: logging, bounded waits, and a broker started
# from a written configuration on a free 127.0.0.1 port. Every wait here is
# bounded in time; every process started here is stopped by its pid.

# The calling script sets NAME (for log lines) and WORK (its directory).
log() { printf '[%s %s] %s\n' "$NAME" "$(date +%H:%M:%S)" "$*" >&2; }

# die <why>: the reason, then the tail of every log and output file in WORK.
die() {
  local f
  log "FAIL: $*"
  for f in "$WORK"/*.log "$WORK"/*.out "$WORK"/*.err; do
    [ -s "$f" ] || continue
    log "--- $f (tail)"
    tail -n 30 "$f" >&2
  done
  exit 1
}

# port_open <port>: something accepts connections on 127.0.0.1:<port>.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port_free() { ! port_open "$1"; }

# wait_for <seconds> <command...>: runs the command every 0.1 s until it
# succeeds; fails (status 1) once the time is up.
wait_for() {
  local tenths=$(($1 * 10)) i
  shift
  for ((i = 0; i < tenths; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}

# gone <pid>: the process has ended (and the shell has reaped it).
gone() { ! kill -0 "$1" 2>/dev/null; }

BROKER_PID=
BROKER_PORT=

# start_broker <conf template> <log>: writes the template with @PORT@
# replaced by a free port to <template>.conf, starts mosquitto -c on it and
# waits (10 s) until it accepts connections; a start that fails (the port
# was taken meanwhile) is retried on another port. Sets BROKER_PID and
# BROKER_PORT.
start_broker() {
  local template=$1 out=$2 conf=$1.conf attempt
  for ((attempt = 0; attempt < 5; attempt++)); do
    BROKER_PORT=$((20000 + RANDOM % 40000))
    port_open "$BROKER_PORT" && continue
    sed "s/@PORT@/$BROKER_PORT/g" "$template" >"$conf"
    chmod 644 "$conf"
    /usr/sbin/mosquitto -c "$conf" >>"$out" 2>&1 &
    BROKER_PID=$!
    if wait_for 10 port_open "$BROKER_PORT" && kill -0 "$BROKER_PID" 2>/dev/null; then
      log "broker pid $BROKER_PID on 127.0.0.1:$BROKER_PORT"
      return 0
    fi
    kill -KILL "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
  done
  die "the broker did not start (config $conf)"
}

# stop_broker: SIGTERM; the broker must exit with status 0 within 15 s.
stop_broker() {
  local status pid=$BROKER_PID
  [ -n "$pid" ] || return 0
  kill -TERM "$pid"
  wait_for 15 gone "$pid" || die "the broker did not stop within 15 s"
  wait "$pid" && status=0 || status=$?
  BROKER_PID=
  [ "$status" = 0 ] || die "the broker exited with status $status after SIGTERM"
  log "broker stopped (SIGTERM, exit status 0)"
}

# kill_broker: for cleanup traps, whatever the broker's state.
kill_broker() {
  if [ -n "$BROKER_PID" ]; then
    kill -KILL "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
    BROKER_PID=
  fi
}

# listen_addrs <pid>: the TCP sockets <pid> listens on, one "address port"
# a line (e.g. "127.0.0.1 1883", ":: 9001", "0.0.0.0 1883", "::1 1883"),
# read from the kernel's tables (/proc/<pid>/net/tcp, tcp6) for the
# sockets among the process's descriptors: what the broker listens on, not
# what its configuration says.
listen_addrs() {
  local pid=$1 inodes
  # find fails when a descriptor closes while it reads them (a broker
  # starting up): what it read is enough, and the caller reads again.
  inodes=$({ find "/proc/$pid/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null || true; } |
    sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | tr '\n' ' ')
  [ -n "$inodes" ] || return 0
  { cat "/proc/$pid/net/tcp" "/proc/$pid/net/tcp6" 2>/dev/null || true; } | awk -v inodes=" $inodes" '
    function hex(s,   i, n) {
      n = 0
      for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(s, i, 1))) - 1
      return n
    }
    # An address as the kernel prints it: IPv4 in one little-endian word,
    # IPv6 in four. IPv6 is printed in full, then shortened to the usual
    # forms for all zeros, loopback and IPv4-mapped addresses.
    function addr(h,   i, w, out, b) {
      if (length(h) == 8)
        return hex(substr(h, 7, 2)) "." hex(substr(h, 5, 2)) "." hex(substr(h, 3, 2)) "." hex(substr(h, 1, 2))
      out = ""
      for (i = 0; i < 4; i++) {
        w = substr(h, 8 * i + 1, 8)
        b = substr(w, 7, 2) substr(w, 5, 2) ":" substr(w, 3, 2) substr(w, 1, 2)
        out = out (i ? ":" : "") b
      }
      out = tolower(out)
      if (out == "0000:0000:0000:0000:0000:0000:0000:0000") return "::"
      if (out == "0000:0000:0000:0000:0000:0000:0000:0001") return "::1"
      if (substr(out, 1, 30) == "0000:0000:0000:0000:0000:ffff:")
        return "::ffff:" addr(substr(h, 25, 8))
      return out
    }
    NR > 0 && $4 == "0A" && index(inodes, " " $10 " ") {
      split($2, a, ":")
      print addr(a[1]), hex(a[2])
    }' | sort -u
}

# doc_links <markdown file>: every relative link of the file ([text](path),
# <img src="path">), and of every Markdown file it leads to, names a file
# that exists (anchors and web addresses aside). Prints the broken ones;
# fails when there is any.
doc_links() {
  local todo=("$1") seen=" " bad=0 f dir target
  while [ ${#todo[@]} -gt 0 ]; do
    f=${todo[0]}
    todo=("${todo[@]:1}")
    case "$seen" in *" $f "*) continue ;; esac
    seen="$seen$f "
    dir=$(dirname "$f")
    while IFS= read -r target; do
      target=${target%%#*}
      [ -n "$target" ] || continue
      case "$target" in *://* | mailto:*) continue ;; esac
      if [ ! -e "$dir/$target" ]; then
        echo "$f links to $target, which is not there" >&2
        bad=1
      elif [ "${target%.md}" != "$target" ]; then
        todo+=("$(cd "$dir" && cd "$(dirname "$target")" && pwd)/$(basename "$target")")
      fi
    done < <(grep -oE '\]\([^) ]+\)|src="[^"]+"' "$f" | sed -E 's/^\]\(//; s/\)$//; s/^src="//; s/"$//')
  done
  return $bad
}

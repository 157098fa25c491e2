#!/usr/bin/env bash
# listeners.sh: every listener of every Mosquitto configuration the project
# ships listens where its listener line says (issue 21, item 1: Debian's
# 2.0.11 put the websockets listener of `listener 9001 127.0.0.1` on *:9001).
# The configurations: mosquitto.conf (what scripts/run starts), the
# packaged web listener snippet (packaging/mosquitto-chat-web.conf.in), and
# every configuration block of README.md and docs/*.md that declares a
# listener. For each, a broker is started from its listener lines (each
# port moved to a free one; http_dir pointed at clients/web; certificates,
# plugins, passwords and logs left out: none of them moves a socket), and
# the sockets it listens on are read from the kernel (/proc/<pid>/net/tcp
# and tcp6, for the broker's own descriptors): every one must be on the
# address its listener names, and every listener must listen.
#
#   tests/listeners.sh <mosquitto> [source dir]     (ctest: integ_sec_listeners_loopback)
#
# Every wait is bounded; every broker is stopped by its pid.
set -euo pipefail
MOSQUITTO=${1:?usage: listeners.sh <mosquitto binary> [source dir]}
ROOT=$(cd "${2:-$(dirname "$0")/..}" && pwd)
NAME=listeners
WORK=$(mktemp -d /tmp/mqchat-listeners.XXXXXX)
chmod 755 "$WORK"
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"
PID=
FAILED=1
cleanup() {
  if [ -n "$PID" ]; then
    kill -KILL "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  if [ "$FAILED" = 0 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else log "kept $WORK"; fi
}
trap cleanup EXIT

# free_port: a port nothing listens on, below Linux's ephemeral range.
free_port() {
  local p i
  for ((i = 0; i < 100; i++)); do
    p=$((20000 + RANDOM % 12000))
    port_free "$p" && ! grep -q "^$p$" "$WORK/taken" 2>/dev/null && { echo "$p" >>"$WORK/taken"; echo "$p"; return 0; }
  done
  die "no free port found"
}

# blocks <markdown file> <out prefix>: writes each fenced block that holds a
# line "listener ..." to <out prefix>.<n>; prints how many.
blocks() {
  awk -v out="$2" '
    /^```/ { if (inb) { if (has) { n++; printf "%s", text > (out "." n); close(out "." n) } inb = 0 }
             else { inb = 1; has = 0; text = "" } next }
    inb { text = text $0 "\n"; if ($0 ~ /^listener [0-9]/) has = 1 }
    END { print n + 0 }' "$1"
}

# check <name> <configuration>: starts a broker from the configuration's
# listener lines and compares the sockets it listens on with them.
check() {
  local name=$1 src=$2 conf="$WORK/$1.conf" want="$WORK/$1.want" got="$WORK/$1.got" line p addr i
  : >"$want"
  {
    echo "# tests/listeners.sh: the listeners of $name"
    while IFS= read -r line; do
      case "$line" in
      listener\ *)
        read -r _ p addr _ <<<"$line"
        i=$(free_port)
        echo "$i ${addr:-*}" >>"$want"
        echo "listener $i${addr:+ $addr}"
        ;;
      protocol\ * | socket_domain\ * | bind_interface\ *) echo "$line" ;;
      http_dir\ *) echo "http_dir $ROOT/clients/web" ;;
      esac
    done <"$src"
    echo "allow_anonymous true"
    echo "log_dest file $WORK/$name.log"
    echo "log_type all"
    # Started as root, the broker would drop to "mosquitto", which may not
    # reach the checkout (http_dir): no socket depends on the user.
    [ "$(id -u)" -ne 0 ] || echo "user root"
  } >"$conf"
  [ -s "$want" ] || die "$name: no listener line in $src"
  "$MOSQUITTO" -c "$conf" >"$WORK/$name.out" 2>&1 &
  PID=$!
  # Ready when every listener listens (or the broker is gone).
  local ready=0
  for ((i = 0; i < 100; i++)); do
    gone "$PID" && break
    listen_addrs "$PID" >"$got"
    if [ "$(cut -d' ' -f1 "$want" | sort -u | wc -l)" -le "$(cut -d' ' -f2 "$got" | sort -u | wc -l)" ]; then
      ready=1
      break
    fi
    sleep 0.1
  done
  [ "$ready" = 1 ] || die "$name: the broker does not listen on every port of $conf: $(tr '\n' ';' <"$got") $(tail -3 "$WORK/$name.log" 2>/dev/null)"
  # Every socket is on its listener's address; no port is left out.
  local port_ want_addr got_addr
  while read -r port_ want_addr; do
    grep -q " $port_\$" "$got" || die "$name: nothing listens on port $port_ ($conf)"
    while read -r got_addr; do
      [ "$want_addr" = "*" ] || [ "$got_addr" = "$want_addr" ] ||
        die "$name: port $port_ listens on $got_addr, where its listener says $want_addr: $(tr '\n' ';' <"$got")"
    done < <(awk -v p="$port_" '$2 == p { print $1 }' "$got")
  done <"$want"
  while read -r got_addr port_; do
    grep -q "^$port_ " "$want" || die "$name: the broker listens on $got_addr:$port_, which no listener names"
  done <"$got"
  kill -TERM "$PID"
  wait_for 15 gone "$PID" || die "$name: the broker did not stop"
  wait "$PID" 2>/dev/null || true
  PID=
  log "$name: $(sed 's/^\([^ ]*\) \(.*\)$/\2:\1/' "$got" | tr '\n' ' ')as its listeners say"
}

check mosquitto.conf "$ROOT/mosquitto.conf"
check web-snippet "$ROOT/packaging/mosquitto-chat-web.conf.in"
n_blocks=0
for md in "$ROOT"/README.md "$ROOT"/docs/*.md; do
  base=$(basename "$md" .md)
  n=$(blocks "$md" "$WORK/$base.block")
  for ((k = 1; k <= n; k++)); do
    check "$base-block$k" "$WORK/$base.block.$k"
    n_blocks=$((n_blocks + 1))
  done
done
[ "$n_blocks" -gt 0 ] || die "no configuration block with a listener in README.md or docs/"
FAILED=0
log "passed: mosquitto.conf, the web snippet and $n_blocks configuration blocks of the docs"

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

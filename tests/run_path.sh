#!/usr/bin/env bash
# run_path.sh: the README's first command, for real. In a copy of the
# checkout (its tracked and new files, as a clone has them: nothing built, no
# data), scripts/run installs what is missing, builds, and starts Mosquitto
# with the plugin, on free loopback ports that it is told with --port and
# --web-port (the first run) or CHAT_PORT and CHAT_WEB_PORT (the second),
# never 1883 and 9001, which may be someone's. The broker must listen on
# 127.0.0.1 alone, on those two ports (its sockets, read from /proc: issue
# 21, item 1). On its fresh store the first run takes the README's tour
# (tests/readme.py: every command block of README.md, checked against what
# the text says it prints). Then a mosquitto_pub -> mosquitto_sub round
# trip through the plugin: the subscriber gets the stored envelope with its
# id, in a replay page and live. SIGTERM stops the broker, which must exit
# with status 0. Run as root (as CI is), the broker drops to the user
# mosquitto, which must own every file of the store; it runs twice, from a
# directory that user may enter and from one it may not (a clone in root's
# home, 0700): mosquitto.conf's paths are relative to the checkout.
#
#   tests/run_path.sh        (scripts/test runs it)
#
# Every wait is bounded; the copy is removed unless KEEP=1 or it failed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=            # MQTT and web ports, free ones, chosen per run
WEB_PORT=
START_S=600        # scripts/run: apt-get, configure, build, broker up
STOP_S=15          # SIGTERM to exit

NAME=run_path
WORK=$(mktemp -d /tmp/mqchat-run-path.XXXXXX)
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"
PID=
FAILED=1
cleanup() {
  if [ -n "$PID" ] && ! gone "$PID"; then
    kill -KILL "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
  fi
  if [ "$FAILED" = 0 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else log "kept $WORK"; fi
}
trap cleanup EXIT

# copy <dir>: the checkout's tracked and untracked, not ignored, files.
copy() {
  mkdir -p "$1"
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf -) | tar -xf - -C "$1"
}

# round_trip <tag>: bob joins, alice sends, bob's subscribe replays it, then a
# live message while he is subscribed.
# shellcheck disable=SC2016 # $CONTROL is a topic, not a variable
round_trip() {
  local g="runpath_$1" out="$WORK/sub-$1.out" sub i
  timeout 15 mosquitto_rr -h 127.0.0.1 -p $PORT -i "rp-bob-$1" -t '$CONTROL/chat/v1' \
    -e '$CONTROL/chat/v1/response' -W 10 \
    -m "{\"commands\":[{\"command\":\"join\",\"group\":\"$g\"}]}" >"$WORK/join-$1.out" ||
    die "join request failed"
  grep -q '"head":0' "$WORK/join-$1.out" || die "join answer: $(cat "$WORK/join-$1.out")"
  timeout 15 mosquitto_pub -h 127.0.0.1 -p $PORT -i "rp-alice-$1" -q 1 -t "chat/$g" \
    -m 'hello through the plugin' || die "mosquitto_pub failed"
  # No -C count: pushes (presence, read receipts) share the response topic
  # with the replay page, so the subscriber runs until the live envelope is
  # in (or 25 s) and is stopped then.
  timeout 30 mosquitto_sub -h 127.0.0.1 -p $PORT -i "rp-bob-$1" -q 1 -t "chat/$g" \
    -t '$CONTROL/chat/v1/response' -v -W 25 >"$out" &
  sub=$!
  wait_for 20 test -s "$out" || true # the replay page
  # The page holds the envelope the plugin stored: its id, group and body.
  grep '"command":"replay"' "$out" | grep "{\"id\":1,\"group\":\"$g\"," |
    grep -q '"body":"hello through the plugin"' || die "no replay page with the envelope #1"
  timeout 15 mosquitto_pub -h 127.0.0.1 -p $PORT -i "rp-alice-$1" -q 1 -t "chat/$g" \
    -m '{"body":"live","cid":"rp-2"}' || die "mosquitto_pub failed"
  wait_for 20 grep -q "^chat/$g {\"id\":2," "$out" || true
  kill "$sub" 2>/dev/null || true
  wait "$sub" 2>/dev/null || true
  grep "^chat/$g {\"id\":2,\"group\":\"$g\"," "$out" | grep -q '"body":"live","cid":"rp-2"' ||
    die "no live envelope #2"
  log "round trip through the plugin: replayed #1, live #2"
}

# free_ports: two free ports below Linux's ephemeral range, in PORT and WEB_PORT.
free_ports() {
  local i
  for ((i = 0; i < 100; i++)); do
    PORT=$((20000 + RANDOM % 12000))
    WEB_PORT=$((20000 + RANDOM % 12000))
    [ "$PORT" != "$WEB_PORT" ] && port_free "$PORT" && port_free "$WEB_PORT" && return 0
  done
  die "no free ports"
}

# run_once <tag> <mode of the copy's parent> <how>: scripts/run with the
# ports as flags (how = flags) or in the environment (env); the README's
# tour on the first; round trip, SIGTERM.
run_once() {
  local tag=$1 dir="$WORK/$1/mosquitto-chat" t0 status i
  mkdir -p "$WORK/$tag"
  chmod "$2" "$WORK" "$WORK/$tag"
  copy "$dir"
  free_ports
  t0=$(date +%s)
  log "$tag: scripts/run in $dir (parent mode $2), ports $PORT and $WEB_PORT by $3"
  if [ "$3" = flags ]; then
    "$dir/scripts/run" --port "$PORT" --web-port "$WEB_PORT" >"$WORK/run-$tag.log" 2>&1 &
  else
    CHAT_PORT=$PORT CHAT_WEB_PORT=$WEB_PORT "$dir/scripts/run" >"$WORK/run-$tag.log" 2>&1 &
  fi
  PID=$!
  for ((i = 0; i < START_S * 10; i++)); do
    if gone "$PID"; then
      wait "$PID" && status=0 || status=$?
      die "scripts/run exited with status $status"
    fi
    port_open $PORT && break
    sleep 0.1
  done
  port_open $PORT || die "nothing listens on 127.0.0.1:$PORT after $START_S s"
  log "$tag: broker up after $(($(date +%s) - t0)) s (build included)"
  # The broker is the process scripts/run became (exec): its sockets.
  wait_for 10 port_open "$WEB_PORT" || die "nothing listens on the web port $WEB_PORT"
  listen_addrs "$PID" >"$WORK/listen-$tag.out"
  [ "$(cat "$WORK/listen-$tag.out")" = "$(printf '127.0.0.1 %s\n127.0.0.1 %s' \
    "$(printf '%s\n' "$PORT" "$WEB_PORT" | sort | head -1)" \
    "$(printf '%s\n' "$PORT" "$WEB_PORT" | sort | tail -1)")" ] ||
    die "the broker listens on $(tr '\n' ';' <"$WORK/listen-$tag.out"), not on 127.0.0.1:$PORT and :$WEB_PORT alone"
  log "$tag: the broker listens on 127.0.0.1:$PORT and 127.0.0.1:$WEB_PORT, nothing else"
  if [ "$tag" = open ]; then
    mkdir -p "$WORK/readme"
    /usr/bin/python3 "$ROOT/tests/readme.py" --root "$dir" --port "$PORT" --work "$WORK/readme" \
      2>"$WORK/readme.err" || { cat "$WORK/readme.err" >&2; die "README.md's command blocks"; }
    sed 's/^/    /' "$WORK/readme.err" >&2
  fi
  round_trip "$tag"
  [ -d "$dir/data/mosquitto-chat.db" ] || die "no store in $dir/data"
  # The page the README promises on the websockets listener.
  timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$WEB_PORT && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
    >"$WORK/page-$tag.html" 2>/dev/null || true
  grep -q 'aria-label="Message"' "$WORK/page-$tag.html" || die "no chat page on 127.0.0.1:$WEB_PORT"
  log "$tag: the chat page is served on 127.0.0.1:$WEB_PORT"
  if [ "$(id -u)" -eq 0 ]; then
    local owner want=mosquitto
    # A checkout the broker's user cannot reach keeps the broker root (see
    # scripts/run): then the store is root's.
    grep -q "the broker stays root" "$WORK/run-$tag.log" && want=root
    owner=$(find "$dir/data/mosquitto-chat.db" -mindepth 1 ! -user "$want" -printf '%p %u\n' | head -3)
    [ -z "$owner" ] || die "store files not owned by $want: $owner"
    log "$tag: every store file is owned by $want"
  fi
  kill -TERM "$PID"
  wait_for $STOP_S gone "$PID" || die "the broker did not stop within $STOP_S s of SIGTERM"
  wait "$PID" && status=0 || status=$?
  PID=
  [ "$status" = 0 ] || die "the broker exited with status $status after SIGTERM"
  log "$tag: SIGTERM: the broker stopped with status 0"
}

run_once open 755 flags
if [ "$(id -u)" -eq 0 ] && id mosquitto >/dev/null 2>&1; then
  run_once closed 700 env
fi
FAILED=0
log "passed"

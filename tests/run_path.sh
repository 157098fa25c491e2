#!/usr/bin/env bash
# run_path.sh: the README's first command, for real. In a copy of the
# checkout (its tracked and new files, as a clone has them: nothing built, no
# data), scripts/run installs what is missing, builds, and starts Mosquitto
# with the plugin on 127.0.0.1:1883. Then a mosquitto_pub -> mosquitto_sub
# round trip through the plugin: the subscriber gets the stored envelope with
# its id, in a replay page and live. SIGTERM stops the broker, which must
# exit with status 0. Run as root (as CI is), the broker drops to the user
# mosquitto, which must own every file of the store; it runs twice, from a
# directory that user may enter and from one it may not (a clone in root's
# home, 0700): mosquitto.conf's paths are relative to the checkout.
#
#   tests/run_path.sh        (scripts/test runs it)
#
# Every wait is bounded; the copy is removed unless KEEP=1 or it failed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=1883          # the README's: scripts/run takes no other
START_S=600        # scripts/run: apt-get, configure, build, broker up
PORT_FREE_S=60     # another broker on 1883 (a developer's) may be stopping
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

# run_once <tag> <mode of the copy's parent>: scripts/run, round trip, SIGTERM.
run_once() {
  local tag=$1 dir="$WORK/$1/mosquitto-chat" t0 status i
  mkdir -p "$WORK/$tag"
  chmod "$2" "$WORK" "$WORK/$tag"
  copy "$dir"
  wait_for $PORT_FREE_S port_free $PORT ||
    die "127.0.0.1:$PORT is in use: the README's run command needs it"
  t0=$(date +%s)
  log "$tag: scripts/run in $dir (parent mode $2)"
  "$dir/scripts/run" >"$WORK/run-$tag.log" 2>&1 &
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
  round_trip "$tag"
  [ -d "$dir/data/mosquitto-chat.db" ] || die "no store in $dir/data"
  # The page the README promises on the websockets listener.
  timeout 10 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9001 && printf "GET / HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
    >"$WORK/page-$tag.html" 2>/dev/null || true
  grep -q 'aria-label="Message"' "$WORK/page-$tag.html" || die "no chat page on 127.0.0.1:9001"
  log "$tag: the chat page is served on 127.0.0.1:9001"
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

run_once open 755
if [ "$(id -u)" -eq 0 ] && id mosquitto >/dev/null 2>&1; then
  run_once closed 700
fi
FAILED=0
log "passed"

#!/usr/bin/env bash
# What works, per access setup, on one broker: the rows of docs/install.md's
# table of broker versions (scripts/test's matrix stages print it for their
# broker). A measurement for the docs, not a test: it asserts nothing and
# exits 0 once every setup was tried.
#
#   tests/access-table.sh <build dir>
#
# The build directory names the broker, its mosquitto_passwd, mosquitto_ctrl
# and dynamic-security plugin (its CMake cache: CHAT_BROKER_PREFIX, else the
# system's), the plugin and mqchat. For each setup, on a free loopback port
# with a new store, in order: bob listens to group room (subscribing joins
# the open group) and alice sends "one" (live: bob prints it); bob stops,
# alice sends "two", bob listens again as the same device (catch-up: he gets
# "two"); bob asks for the history; alice asks for the receipts and who is
# online while bob listens. The setups, each as docs/protocol.md documents
# it: none (anonymous clients); password_file (users alice and bob);
# acl_file (password_file and an acl_file granting the chat topics with
# pattern lines); dynamic-security (its plugin after mosquitto-chat's, both
# users with the role "chatter").
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 <build dir>" >&2; exit 2; }
build=$(realpath "$1")
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
broker=$(cache MOSQUITTO_BIN)
passwd=$(cache MOSQUITTO_PASSWD_BIN)
ctrl=$(cache MOSQUITTO_CTRL_BIN)
dynsec=$(cache MOSQUITTO_DYNSEC_PLUGIN)
plugin=$build/plugin/mosquitto_chat.so
mqchat=$build/clients/mqchat
for f in "$broker" "$passwd" "$ctrl" "$dynsec" "$plugin" "$mqchat"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "$0: missing $f" >&2; exit 2; }
done
version=$({ "$broker" -h 2>&1 || true; } | sed -n "s/^mosquitto version //p" | head -1)

dir=$(mktemp -d /tmp/mqchat-access-XXXXXX)
pid=
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  return 1
}

start() { # <setup dir>: starts the broker of <setup dir>/mosquitto.conf
  "$broker" -c "$1/mosquitto.conf" >>"$1/broker.out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    grep -q ' running' "$1/log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "$0: the broker did not start:" >&2
  tail -5 "$1/log" "$1/broker.out" >&2 || true
  return 1
}

stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}

# mq <setup dir> <user> <args...>: mqchat as user (password "<user>pw" where
# the setup has users).
mq() {
  local d=$1 user=$2
  shift 2
  local auth=(-u "$user")
  [ -f "$d/users" ] && auth+=(-P "${user}pw")
  timeout 30 "$mqchat" -h 127.0.0.1 -p "$(cat "$d/port")" "${auth[@]}" --quiet -W 3 "$@"
}

probe() { # <setup>: prints the table row's cells
  local s=$1 d=$dir/$1 port live=no catchup=no history=no receipts=no presence=no out
  mkdir -p "$d/db"
  port=$(free_port)
  echo "$port" >"$d/port"
  {
    echo "listener $port 127.0.0.1"
    echo "log_dest file $d/log"
    echo "log_type all"
    echo "persistence false"
    [ "$(id -u)" -ne 0 ] || echo "user root"
    case $s in
      none) echo "allow_anonymous true" ;;
      *) echo "allow_anonymous false" ;;
    esac
    case $s in
      password_file | acl_file) echo "password_file $d/passwd" ;;
    esac
    [ "$s" != acl_file ] || echo "acl_file $d/acl"
    echo "plugin $plugin"
    echo "plugin_opt_db_path $d/db"
    if [ "$s" = dynamic-security ]; then
      echo "plugin $dynsec"
      echo "plugin_opt_config_file $d/dynsec.json"
    fi
  } >"$d/mosquitto.conf"
  case $s in
    password_file | acl_file)
      touch "$d/users" "$d/passwd"
      "$passwd" -b "$d/passwd" alice alicepw >/dev/null
      "$passwd" -b "$d/passwd" bob bobpw >/dev/null
      printf 'pattern readwrite chat/#\npattern write $CONTROL/chat/v1\n' >"$d/acl"
      ;;
    dynamic-security)
      touch "$d/users"
      "$ctrl" dynsec init "$d/dynsec.json" admin adminpw >/dev/null 2>&1
      ;;
  esac
  start "$d" || { echo "| $s | broker does not start | | | | |"; return; }
  if [ "$s" = dynamic-security ]; then
    local c=("$ctrl" -h 127.0.0.1 -p "$port" -u admin -P adminpw dynsec)
    "${c[@]}" createRole chatter >/dev/null 2>&1
    "${c[@]}" addRoleACL chatter publishClientSend 'chat/#' allow >/dev/null 2>&1
    "${c[@]}" addRoleACL chatter publishClientReceive 'chat/#' allow >/dev/null 2>&1
    "${c[@]}" addRoleACL chatter subscribePattern 'chat/#' allow >/dev/null 2>&1
    "${c[@]}" addRoleACL chatter publishClientSend '$CONTROL/chat/v1' allow >/dev/null 2>&1
    "${c[@]}" addRoleACL chatter subscribeLiteral '$CONTROL/chat/v1/response' allow >/dev/null 2>&1
    for u in alice bob; do
      "${c[@]}" createClient "$u" -p "${u}pw" >/dev/null 2>&1
      "${c[@]}" addClientRole "$u" chatter >/dev/null 2>&1
    done
  fi
  # live
  mq "$d" bob -i bob-dev listen room -C 1 -W 8 --state "$d/bob.state" >"$d/live.out" 2>&1 &
  local l=$!
  sleep 1 # bob's subscribe (joins) before alice sends
  mq "$d" alice send room one >/dev/null 2>&1 || true
  wait "$l" || true
  grep -q 'one' "$d/live.out" && live=yes
  # catch-up: bob away, then back as the same device
  mq "$d" alice send room two >/dev/null 2>&1 || true
  mq "$d" bob -i bob-dev listen room -C 1 -W 5 --state "$d/bob.state" >"$d/catchup.out" 2>&1 || true
  grep -q 'two' "$d/catchup.out" && catchup=yes
  if out=$(mq "$d" bob history room 2>&1) && grep -q 'one' <<<"$out"; then history=yes; fi
  echo "history: $out" >"$d/history.out"
  mq "$d" bob -i bob-dev listen room -W 6 --state "$d/bob.state" >/dev/null 2>&1 &
  l=$!
  sleep 1
  if out=$(mq "$d" alice receipts room 2>&1); then receipts=yes; fi
  echo "receipts: $out" >"$d/receipts.out"
  if out=$(mq "$d" alice who room 2>&1) && grep -q 'bob' <<<"$out"; then presence=yes; fi
  echo "who: $out" >"$d/who.out"
  wait "$l" || true
  stop
  echo "| $s | $live | $catchup | $history | $receipts | $presence |"
  if [ -n "${ACCESS_TABLE_VERBOSE:-}" ]; then
    cat "$d/live.out" "$d/catchup.out" "$d/history.out" "$d/receipts.out" "$d/who.out" >&2
    grep 'mosquitto-chat' "$d/log" | cut -c1-200 >&2
  fi
}

echo "Mosquitto $version ($broker):"
echo
echo "| access setup | live | catch-up | history | receipts | presence |"
echo "|---|---|---|---|---|---|"
for s in none password_file acl_file dynamic-security; do
  probe "$s"
done

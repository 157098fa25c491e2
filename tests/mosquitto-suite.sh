#!/usr/bin/env bash
# Mosquitto's own broker tests (test/broker of the Debian source package, as
# Debian's autopkgtest runs them) with mosquitto-chat loaded into every broker
# they start, compared with a run without it: no test that passes without the
# plugin may fail with it.
#
#   tests/mosquitto-suite.sh <version> <plugin.so> [test-name-regex]
#
# <version> is one of scripts/brokers (2.0.21, 2.1.2), built there first if
# needed. Each test runs twice, one after the other, in a copy of the
# source tree (build-brokers/suite-<version>/): once as is, once with the
# plugin; both through the same wrapper (suite-<version>/mosquitto), which
# stands where the tests start /usr/sbin/mosquitto (Debian's deb-test.patch)
# and, with the plugin, adds `plugin <plugin.so>` and `plugin_opt_db_path <a
# new directory>` to the configuration it is given, before every other
# plugin line and for every listener (the wrapper below says how). The
# broker's own plugins and the test plugins come from the same build.
#
# Prints one line per test (pass/fail without and with the plugin), then the
# counts, and exits 1 if any test passes without the plugin and fails with it.
# Logs: build-brokers/suite-<version>/logs/<test>.{plain,chat}.log.
# Serial, about 20 (2.0.21) and 30 (2.1.2) minutes on 2 cores: not in CI (see
# docs/testing.md). Needs python3-psutil (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { echo "usage: $0 <version> <plugin.so> [test-regex]" >&2; exit 2; }
version=$1
plugin=$(realpath "$2")
only=${3:-}
[ -f "$plugin" ] || { echo "$0: no plugin $plugin" >&2; exit 2; }

scripts/brokers "$version" >&2
prefix=$(scripts/brokers --prefix "$version")
top=$PWD/build-brokers
work=$top/suite-$version
TIMEOUT=${SUITE_TIMEOUT:-180}

# Debian's python3, which python3-psutil serves, whatever else PATH has.
export PATH=/usr/bin:/bin:$PATH
if ! python3 -c 'import psutil' 2>/dev/null; then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    python3-psutil >/dev/null
fi

# A fresh copy of the patched sources: the tests write beside themselves.
rm -rf "$work"
mkdir -p "$work/logs" "$work/db"
chmod 1777 "$work/db" # the broker drops to the mosquitto user when started as root
cp -a "$top/src/mosquitto-$version" "$work/src"
chmod 755 "$work/src/test/broker/"*.py

# The wrapper the tests start instead of /usr/sbin/mosquitto. With the
# plugin, its lines (`plugin`, `plugin_opt_db_path`) come before every other
# plugin line, as docs/protocol.md says to load it: the broker runs on a new
# main file that includes a directory holding them (00-chat.conf) and a link
# to the test's file (50-test.conf), so that a reload (SIGHUP) reads the
# test's file as it is then. A test file with per_listener_settings true is
# copied instead, with the plugin's lines after each `listener` and `port`
# line on 2.0 (every listener loads it, as protocol.md requires), or once as
# `global_plugin` right after per_listener_settings on 2.1; one with an
# include_dir of its own (read only in the main file) is copied with the
# plugin's lines first. Run as root, both runs get `user root` unless the
# test sets a user: the broker would drop to the user mosquitto, which cannot
# write the files the tests make (dynamic security's, persistence). A missing
# file, or no -c, goes to the broker as it is, `mosquitto -p <port>` with the
# plugin excepted: a new file with `allow_anonymous true` and the plugin, the
# port left on the command line.
cat >"$work/mosquitto" <<EOF
#!/usr/bin/env bash
# Written by tests/mosquitto-suite.sh: mosquitto $version, with the chat plugin
# added to its configuration when CHAT_SUITE_PLUGIN is set.
broker=$prefix/sbin/mosquitto
global=$( [[ $version == 2.0.* ]] && echo no || echo yes )
args=() conf=
orig=("\$@")
while [ \$# -gt 0 ]; do
  case \$1 in
    -c) [ \$# -ge 2 ] || exec "\$broker" "\${orig[@]}"; conf=\$2; shift 2 ;;
    *) args+=("\$1"); shift ;;
  esac
done
if { [ -n "\$conf" ] && [ ! -r "\$conf" ]; } || { [ -z "\$conf" ] && [ -z "\${CHAT_SUITE_PLUGIN:-}" ]; }; then
  exec "\$broker" "\${orig[@]}"
fi
d=\$(mktemp -d "$work/db/XXXXXX")
chmod 777 "\$d"
mkdir "\$d/conf.d" "\$d/store"
chmod 777 "\$d/store"
chat=\$d/conf.d/00-chat.conf
: >"\$chat"
if [ -n "\${CHAT_SUITE_PLUGIN:-}" ]; then
  printf 'plugin %s\nplugin_opt_db_path %s\n' "\$CHAT_SUITE_PLUGIN" "\$d/store" >"\$chat"
fi
user_root() { # the line, unless not root or the test sets a user
  [ "\$(id -u)" -ne 0 ] || grep -q '^[[:space:]]*user[[:space:]]' "\$1" || echo 'user root'
}
if [ -z "\$conf" ]; then
  { echo 'allow_anonymous true'; cat "\$chat"; } >"\$d/main.conf"
elif grep -Eq '^[[:space:]]*per_listener_settings[[:space:]]+true' "\$conf"; then
  if [ "\$global" = yes ]; then
    # 2.1: once, as global_plugin, right after per_listener_settings
    sed -i 's/^plugin /global_plugin /' "\$chat"
    pattern='^[[:space:]]*per_listener_settings[[:space:]]'
  else
    pattern='^[[:space:]]*(listener|port)[[:space:]]'
  fi
  { user_root "\$conf"
    awk -v chat="\$chat" -v pat="\$pattern" '{ print } \$0 ~ pat {
      while ((getline l < chat) > 0) print l; close(chat) }' "\$conf"; } >"\$d/main.conf"
elif grep -q '^[[:space:]]*include_dir' "\$conf"; then
  { user_root "\$conf"; cat "\$chat" "\$conf"; } >"\$d/main.conf"
else
  ln -s "\$(realpath "\$conf")" "\$d/conf.d/50-test.conf"
  { user_root "\$conf"; echo "include_dir \$d/conf.d"; } >"\$d/main.conf"
fi
exec "\$broker" -c "\$d/main.conf" "\${args[@]}"
EOF
chmod 755 "$work/mosquitto"

# The tests name /usr/sbin/mosquitto and Debian's plugin directory.
arch=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
grep -rlE "/usr/sbin/mosquitto|/usr/lib/'\+arch\+'/mosquitto/" "$work/src/test" |
  xargs sed -i -e "s|/usr/sbin/mosquitto|$work/mosquitto|g" \
    -e "s|'/usr/lib/'+arch+'/mosquitto/'|'$prefix/lib/'|g"
# The brokers find the bare "mosquitto_dynamic_security.so" and the test
# plugins their libmosquitto there.
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export BUILD_ROOT=$top/build-$version

# The certificates of test/ssl, made again as Debian's autopkgtest does.
(cd "$work/src/test/ssl" && ./gen.sh) >"$work/logs/ssl-gen.log" 2>&1 ||
  echo "$0: test/ssl/gen.sh failed (see $work/logs/ssl-gen.log)" >&2

# The test plugins and programs of test/broker/c, against this version.
make -C "$work/src/test/broker/c" -j"$(nproc)" LDFLAGS="-L$prefix/lib -Wl,-rpath,$prefix/lib" \
  >"$work/logs/test-compile.log" 2>&1 ||
  { tail -20 "$work/logs/test-compile.log" >&2; echo "$0: test/broker/c does not build" >&2; exit 1; }

# The tests the Makefile's `test` target runs, in its order (not ptest's
# ./test.py, which runs them all at once); 2.1's PERSIST_TESTS run with each
# of its PERSIST_PLUGINS (persist_sqlite) as their argument.
mapfile -t tests < <(awk '
  /^PERSIST_TESTS *=/ { persist = 1; next }
  /^\t\.\/[^ ]*\.py/ && !/^\t\.\/test\.py/ {
    line = $0; sub(/^\t/, "", line); cont = sub(/ *\\$/, "", line)
    print line (persist ? " persist_sqlite" : "")
    if (!cont) persist = 0
    next
  }
  { persist = 0 }' "$work/src/test/broker/Makefile")
[ ${#tests[@]} -gt 0 ] || { echo "$0: no tests in test/broker/Makefile" >&2; exit 1; }

# run_one <command> <log>: the command's status. Each test runs in a process
# group of its own, ended after it: a test that fails may leave its broker
# running on the fixed port the next test needs.
run_one() {
  local rc=0 pgid
  (cd "$work/src/test/broker" && exec setsid bash -c 'echo $$ >"$0"; exec timeout -k 5 "$1" $2' \
    "$work/pgid" "$TIMEOUT" "$1") >"$2" 2>&1 || rc=$?
  pgid=$(cat "$work/pgid" 2>/dev/null || true)
  if [ -n "$pgid" ] && kill -0 -- "-$pgid" 2>/dev/null; then
    echo "(processes of the test left running: ended)" >>"$2"
    kill -- "-$pgid" 2>/dev/null || true
    sleep 0.5
    kill -9 -- "-$pgid" 2>/dev/null || true
  fi
  rm -f "$work/pgid"
  return $rc
}

declare -i n=0 plain_ok=0 chat_ok=0 both_fail=0 regress=0
regressions=()
for t in "${tests[@]}"; do
  name=$(basename "${t%% *}" .py)${t#"${t%% *}"}
  name=${name// /_}
  [ -z "$only" ] || [[ $name =~ $only ]] || continue
  n+=1
  p=pass c=pass
  run_one "$t" "$work/logs/$name.plain.log" || p=FAIL
  CHAT_SUITE_PLUGIN=$plugin run_one "$t" "$work/logs/$name.chat.log" || c=FAIL
  [ $p = pass ] && plain_ok+=1
  [ $c = pass ] && chat_ok+=1
  [ $p = FAIL ] && [ $c = FAIL ] && both_fail+=1
  if [ $p = pass ] && [ $c = FAIL ]; then
    regress+=1
    regressions+=("$name")
  fi
  printf '%-55s without %s  with %s\n' "$name" $p $c
done
echo "mosquitto $version test/broker: $n tests; without the plugin $plain_ok passed," \
  "$((n - plain_ok)) failed; with it $chat_ok passed, $((n - chat_ok)) failed;" \
  "$regress pass only without it"
for r in "${regressions[@]}"; do
  echo "  fails only with the plugin: $r (logs: $work/logs/$r.{plain,chat}.log)"
done
[ "$regress" -eq 0 ]

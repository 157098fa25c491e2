#!/usr/bin/env bash
# install.sh: `cmake --install` as a user runs it, into a prefix of its own
# (--prefix, so nothing outside this test's directory changes). Checks that every file is where
# packaging/install.cmake says, that the client library exports its API and
# nothing else and installs its public header only, and that the
# pkg-config file and the conf snippet (00-mosquitto-chat.conf) name the
# installed paths; an install over 0.1.0's snippet (mosquitto-chat.conf)
# leaves that file alone and warns. Then the
# example application, taken from the installed docs, is built outside the
# tree against the installed library, once with CMake and pkg-config and
# once with cc and pkg-config (shared and static), and chats, with the
# installed mqchat, through a broker that loads the installed plugin.
#
#   tests/install.sh [build dir]     (default build-rel; scripts/test runs it)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build-rel}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
NAME=install
WORK=$(mktemp -d /tmp/mqchat-install.XXXXXX)
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"
FAILED=1
APP=
cleanup() {
  [ -n "$APP" ] && ! gone "$APP" && { kill -KILL "$APP" 2>/dev/null || true; }
  kill_broker
  if [ "$FAILED" = 0 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else log "kept $WORK"; fi
}
trap cleanup EXIT

P=$WORK/prefix
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$BUILD/CMakeCache.txt")
[ -n "$libdir" ] || die "$BUILD is not a configured build"
LIB=$P/$libdir
DOC=$P/share/doc/mosquitto-chat

# --- cmake --install -------------------------------------------------------
cmake --install "$BUILD" --prefix "$P" >"$WORK/install.log" ||
  die "cmake --install failed"
for f in bin/mqchat "$libdir/mosquitto-chat/mosquitto_chat.so" \
  "$libdir/libmosquitto-chat-client.a" "$libdir/libmosquitto-chat-client.so" \
  "$libdir/libmosquitto-chat-client.so.0" "$libdir/pkgconfig/mosquitto-chat-client.pc" \
  include/mosquitto-chat/chat_client.h etc/mosquitto/conf.d/00-mosquitto-chat.conf \
  share/doc/mosquitto-chat/README.md share/doc/mosquitto-chat/docs/protocol.md \
  share/doc/mosquitto-chat/docs/client.md share/doc/mosquitto-chat/docs/install.md \
  share/doc/mosquitto-chat/docs/web.md share/doc/mosquitto-chat/mosquitto.conf \
  share/doc/mosquitto-chat/copyright share/doc/mosquitto-chat/changelog.gz \
  share/doc/mosquitto-chat/examples/chat_example/example.c \
  share/doc/mosquitto-chat/examples/chat_example/CMakeLists.txt \
  share/mosquitto-chat/web/index.html share/mosquitto-chat/web/js/app.js \
  share/mosquitto-chat/web/config.json share/mosquitto-chat/web/vendor/mqtt.min.js \
  share/mosquitto-chat/mosquitto-chat-web.conf; do
  [ -e "$P/$f" ] || die "not installed: <prefix>/$f"
done
headers=$(cd "$P/include" && find . -type f | sort | tr '\n' ' ')
[ "$headers" = "./mosquitto-chat/chat_client.h " ] || die "installed headers: $headers"
# The shared library exports chat_client_* (and the version script's node)
# only: none of the library's internal functions.
extra=$(nm -D --defined-only "$LIB/libmosquitto-chat-client.so" | awk '{print $3}' |
  grep -v '^chat_client_' || true)
[ -z "$extra" ] || die "the shared library exports more than its API: $extra"
soname=$(objdump -p "$LIB/libmosquitto-chat-client.so" | awk '/SONAME/ {print $2}')
[ "$soname" = libmosquitto-chat-client.so.0 ] || die "SONAME $soname"
grep -qx "plugin $P/$libdir/mosquitto-chat/mosquitto_chat.so" \
  "$P/etc/mosquitto/conf.d/00-mosquitto-chat.conf" || die "the snippet names another plugin path"
grep -qx "http_dir $P/share/mosquitto-chat/web" "$P/share/mosquitto-chat/mosquitto-chat-web.conf" ||
  die "the web snippet names another http_dir"
# Every document README.md links to is installed, and what those link to.
doc_links "$DOC/README.md" || die "the installed docs link to files that are not installed"
log "cmake --install: every file in place; headers: $headers; SONAME $soname"

# Installed over 0.1.0, whose snippet was mosquitto-chat.conf: the old file
# stays as it is (it may hold the user's edits), and the install says to
# move them, since a broker that reads both snippets refuses to start.
old_snippet=$P/etc/mosquitto/conf.d/mosquitto-chat.conf
[ ! -e "$old_snippet" ] || die "cmake --install wrote the old snippet name $old_snippet"
echo '# the user: edited' >"$old_snippet"
cmake --install "$BUILD" --prefix "$P" >"$WORK/reinstall.log" 2>&1 || die "cmake --install again failed"
tr -s ' \n' ' ' <"$WORK/reinstall.log" |
  grep -q "$old_snippet is the snippet's name up to 0.1.0: move your changes into 00-mosquitto-chat.conf" ||
  die "cmake --install over 0.1.0's snippet did not warn"
[ "$(cat "$old_snippet")" = '# the user: edited' ] || die "cmake --install changed $old_snippet"
rm "$old_snippet"
log "cmake --install over 0.1.0's mosquitto-chat.conf: kept, with a warning to move it"

# --- the example, outside the tree ----------------------------------------
# PKG_CONFIG_PATH: the prefix is not one pkg-config searches by itself.
export PKG_CONFIG_PATH=$LIB/pkgconfig
[ "$(pkg-config --modversion mosquitto-chat-client)" = "$(sed -n \
  's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")" ] || die "pkg-config version"
cp -r "$DOC/examples/chat_example" "$WORK/app"
cmake -S "$WORK/app" -B "$WORK/app/build" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" \
  >"$WORK/app-cmake.log" 2>&1 || die "the example's cmake failed"
cmake --build "$WORK/app/build" >>"$WORK/app-cmake.log" 2>&1 || die "the example did not build"
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror "$WORK/app/example.c" $(pkg-config --cflags --libs mosquitto-chat-client) \
  -o "$WORK/app/example-cc" 2>"$WORK/app-cc.log" || die "cc with pkg-config failed"
# The static library: the archive, and its dependencies from --static.
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror "$WORK/app/example.c" $(pkg-config --cflags mosquitto-chat-client) \
  "$LIB/libmosquitto-chat-client.a" $(pkg-config --static --libs-only-l mosquitto-chat-client |
  sed 's/-lmosquitto-chat-client//') -pthread -o "$WORK/app/example-static" \
  2>"$WORK/app-static.log" || die "linking the static library failed"
ldd "$WORK/app/example-static" | grep -q mosquitto-chat-client &&
  die "example-static needs the shared library"
unset PKG_CONFIG_PATH
log "example built with CMake + pkg-config, with cc + pkg-config, and statically"

# --- a broker with the installed plugin, loaded by the installed snippet --
mkdir -p "$WORK/conf.d" "$WORK/store"
sed "s#^plugin_opt_db_path .*#plugin_opt_db_path $WORK/store#" \
  "$P/etc/mosquitto/conf.d/00-mosquitto-chat.conf" >"$WORK/conf.d/00-mosquitto-chat.conf"
cat >"$WORK/broker" <<EOF
# Written by tests/install.sh: a loopback listener and the installed snippet.
listener @PORT@ 127.0.0.1
allow_anonymous true
user $(id -un)
log_type all
include_dir $WORK/conf.d
EOF
start_broker "$WORK/broker" "$WORK/broker.log"
mqchat() { "$P/bin/mqchat" -p "$BROKER_PORT" --quiet "$@"; }
mqchat -i bob join room >"$WORK/join.out" || die "mqchat join failed"
mqchat -i alice send room 'hello from mqchat' || die "mqchat send failed"

# The example as bob: it catches up on alice's message, then sends the line
# it reads once that message is shown; end of input: flush and exit.
mkfifo "$WORK/app.in"
cd "$WORK" # the example writes bob.state here
LD_LIBRARY_PATH=$LIB "$WORK/app/build/chat_example" 127.0.0.1 "$BROKER_PORT" bob room \
  <"$WORK/app.in" >"$WORK/app.out" 2>"$WORK/app.err" &
APP=$!
exec 3>"$WORK/app.in"
wait_for 20 grep -q '^\[room #1\] alice: hello from mqchat$' "$WORK/app.out" ||
  die "the example did not show alice's message"
echo 'hello from the example' >&3
exec 3>&-
wait_for 20 gone "$APP" || die "the example did not end after its input did"
wait "$APP" || die "the example exited with status $?"
APP=
mqchat -i alice history room -n 2 >"$WORK/history.out" || die "mqchat history failed"
grep -q '^\[room #2\] bob: hello from the example$' "$WORK/history.out" ||
  die "bob's message is not in the history"
stop_broker
log "the example and mqchat chatted through the installed plugin"
FAILED=0
log "passed"

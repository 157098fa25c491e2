#!/usr/bin/env bash
# package.sh: the Debian package as an operator meets it. Builds it with
# `cmake --build <dir> --target package`, checks its name, dependencies,
# conffile and maintainer scripts, runs lintian (no errors), installs it with
# dpkg -i, and starts /usr/sbin/mosquitto as root from a configuration that
# includes the packaged snippet beside a loopback listener on a free port:
# the broker drops to the user mosquitto before it loads the plugin. The
# installed mqchat and the example application, built against the installed
# library with pkg-config and nothing else, chat through it; enough data goes
# in for LevelDB's background thread to write table files, and every file of
# the store must be owned by mosquitto. The package creates the backup
# directory of its snippet (owned by mosquitto), ships every document the
# installed README links to, and the web page with MQTT.js and its listener
# snippet: enabled (copied into the broker's conf.d, its ports moved to free
# ones), the installed broker serves the page over HTTP, on loopback only.
# Then the broker stops, dpkg -r keeps the store (and, as dpkg does with
# conffiles, the snippet), dpkg --purge removes both, and the backup
# directory when empty.
#
# The snippet is /etc/mosquitto/conf.d/00-mosquitto-chat.conf, read before
# any other snippet there (the plugin refuses to start behind another
# plugin); 0.1.0 named it mosquitto-chat.conf. Upgrades from a stand-in for
# 0.1.0 (the same package, the old snippet its only file) rename it: an
# unedited one becomes this version's, an edited one keeps the operator's
# edits under the new name (this version's beside it, as .dpkg-new) and
# the broker starts with it, a deleted one stays deleted under both names,
# one renamed by hand is kept; dpkg asks nothing, and purge leaves nothing.
#
#   tests/package.sh [build dir]     (default build-rel; scripts/test runs it)
#
# Needs root (CI is): skips otherwise. Leaves the machine as it found it: it
# refuses to run when the package, the store or the snippet is there already,
# purges the package on any failure, and a lock keeps two runs on one machine
# from overlapping.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build-rel}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
NAME=package
STORE=/var/lib/mosquitto/chat
BACKUPS=/var/backups/mosquitto-chat
CONFD=/etc/mosquitto/conf.d
SNIPPET=$CONFD/00-mosquitto-chat.conf
OLD_SNIPPET=$CONFD/mosquitto-chat.conf # up to 0.1.0
PLUGIN=/usr/lib/mosquitto-chat/mosquitto_chat.so
WEB=/usr/share/mosquitto-chat/web
WEB_SNIPPET=/usr/share/mosquitto-chat/mosquitto-chat-web.conf
DOC=/usr/share/doc/mosquitto-chat

if [ "$(id -u)" -ne 0 ]; then
  echo "[package] SKIPPED: installing a package needs root (CI runs as root)" >&2
  exit 0
fi
WORK=$(mktemp -d /tmp/mqchat-package.XXXXXX)
chmod 755 "$WORK" # the broker, once it is the user mosquitto, reads its config here
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"
FAILED=1
INSTALLED=0
APP=
cleanup() {
  [ -n "$APP" ] && ! gone "$APP" && { kill -KILL "$APP" 2>/dev/null || true; }
  kill_broker
  if [ "$INSTALLED" = 1 ]; then
    dpkg_wait --purge mosquitto-chat >>"$WORK/dpkg.log" 2>&1 || log "cleanup: dpkg --purge failed"
  fi
  if [ "$FAILED" = 0 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else log "kept $WORK"; fi
}
trap cleanup EXIT

# dpkg_wait <args>: dpkg, waiting (120 s) while another dpkg or apt holds its lock.
dpkg_wait() {
  local i
  for ((i = 0; i < 120; i++)); do
    if dpkg "$@" 2>"$WORK/dpkg.err"; then return 0; fi
    grep -q 'lock' "$WORK/dpkg.err" || { cat "$WORK/dpkg.err" >&2; return 1; }
    sleep 1
  done
  cat "$WORK/dpkg.err" >&2
  return 1
}

exec 9>/run/lock/mosquitto-chat-package-test.lock
flock -w 600 9 || die "another package test held the lock for 10 minutes"
status=$(dpkg-query -W -f='${Status}' mosquitto-chat 2>/dev/null || true)
case "$status" in "" | *not-installed) ;; *) die "mosquitto-chat is installed ($status): not touching it" ;; esac
for f in "$STORE" "$BACKUPS" "$CONFD"/*mosquitto-chat.conf*; do
  [ ! -e "$f" ] || die "$f exists already: not touching it"
done

# snippet_dir <name>: the directory a broker of this test includes:
# /etc/mosquitto/conf.d, or, when that holds other snippets, $WORK/<name>
# with a link to ours alone.
snippet_dir() {
  if [ -z "$(find "$CONFD" -maxdepth 1 -name '*.conf' ! -name "$(basename "$SNIPPET")")" ]; then
    echo "$CONFD"
    return
  fi
  mkdir -m 755 "$WORK/$1"
  ln -s "$SNIPPET" "$WORK/$1/"
  log "other snippets in $CONFD: including ours alone"
  echo "$WORK/$1"
}

# --- build and inspect ----------------------------------------------------
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
deb=$BUILD/mosquitto-chat_${version}_$(dpkg --print-architecture).deb
rm -f "$deb"
cmake --build "$BUILD" --target package >"$WORK/cpack.log" 2>&1 || die "the package target failed"
[ -f "$deb" ] || die "no $deb"
dpkg-deb -f "$deb" Depends >"$WORK/depends.out"
grep -q 'mosquitto (>= 2.0)' "$WORK/depends.out" || die "Depends lacks mosquitto (>= 2.0)"
for lib in libc6 libleveldb1d libcjson1 libpaho-mqtt1.3 libssl3; do # from dpkg-shlibdeps
  grep -q "$lib" "$WORK/depends.out" || die "Depends lacks $lib: $(cat "$WORK/depends.out")"
done
# loaded at run time (libpq5 by a PostgreSQL store, libcurl4 by push), so
# recommended rather than found by dpkg-shlibdeps
dpkg-deb -f "$deb" Recommends | grep -q 'libcurl4' || die "Recommends lacks libcurl4"
dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles | grep -qx "$SNIPPET" ||
  die "$SNIPPET is not a conffile"
dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ".$SNIPPET" >"$WORK/snippet.out"
# The snippet loads the plugin, names the store and sets nodelay: nothing else.
directives=$(grep -v '^#' "$WORK/snippet.out" | grep -v '^$' | LC_ALL=C sort | tr '\n' '|')
want="plugin $PLUGIN|plugin_opt_backup_dir $BACKUPS|plugin_opt_db_path $STORE|set_tcp_nodelay true|"
[ "$directives" = "$want" ] || die "the snippet says: $directives"
lintian --fail-on error --display-level '>=warning' "$deb" >"$WORK/lintian.out" 2>&1 ||
  die "lintian reports errors"
log "built $(basename "$deb"): Depends $(cat "$WORK/depends.out"); lintian: no errors," \
  "$(grep -c '^W:' "$WORK/lintian.out" || true) warnings"
sed -n 's/^/    /p' "$WORK/lintian.out" | grep ' W: ' >&2 || true

# --- install --------------------------------------------------------------
INSTALLED=1
dpkg_wait -i "$deb" >"$WORK/dpkg.log" || die "dpkg -i failed"
for f in "$PLUGIN" /usr/bin/mqchat "$SNIPPET"; do
  [ -f "$f" ] || die "$f missing after dpkg -i"
done
for d in "$STORE" "$BACKUPS"; do
  [ "$(stat -c '%U %a' "$d")" = "mosquitto 700" ] || die "$d is not mosquitto's, mode 700, after dpkg -i"
done
# What failed before (issue 25, item 3): the broker's user makes a backup there.
runuser -u mosquitto -- mkdir "$BACKUPS/probe" && rmdir "$BACKUPS/probe" ||
  die "the user mosquitto cannot create a backup in $BACKUPS"
log "dpkg -i: plugin, mqchat, snippet in place; $STORE and $BACKUPS owned by mosquitto"
# Every document the installed README links to, and those they link to.
doc_links "$DOC/README.md" || die "the installed docs link to files that are not installed"
# The web page, MQTT.js beside it, and its listener snippet, which nothing
# loads until it is copied into conf.d.
for f in "$WEB/index.html" "$WEB/chat.css" "$WEB/config.json" "$WEB/js/app.js" \
  "$WEB/vendor/mqtt.min.js" "$WEB_SNIPPET"; do
  [ -f "$f" ] || die "$f missing after dpkg -i"
done
cmp -s "$WEB/vendor/mqtt.min.js" "$ROOT/node_modules/mqtt/dist/mqtt.min.js" ||
  die "the packaged MQTT.js is not node_modules/mqtt/dist/mqtt.min.js"
grep -qx "http_dir $WEB" "$WEB_SNIPPET" || die "the web snippet does not serve $WEB"
log "dpkg -i: every linked document, the web page and its (off) listener snippet in place"

# The example application, built as its docs say, against the system's copy.
cp -r /usr/share/doc/mosquitto-chat/examples/chat_example "$WORK/app"
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror "$WORK/app/example.c" $(pkg-config --cflags --libs mosquitto-chat-client) \
  -o "$WORK/app/chat_example" 2>"$WORK/app.err" || die "the example did not build"

# --- the broker, started as root with the packaged snippet ----------------
# Debian's own mosquitto.conf would also write to /var/lib/mosquitto and
# /var/log: this one has only a listener, and reads the snippet from
# /etc/mosquitto/conf.d (or, when that holds other snippets, from a copy of
# the directory with ours alone).
include=$(snippet_dir conf.d)
cat >"$WORK/broker" <<EOF
# Written by tests/package.sh. No "user" line: started as root, the broker
# drops to the user mosquitto.
listener @PORT@ 127.0.0.1
allow_anonymous true
log_type all
include_dir $include
EOF
start_broker "$WORK/broker" "$WORK/broker.log"
[ "$(stat -c %U "/proc/$BROKER_PID")" = mosquitto ] || die "the broker does not run as mosquitto"
mqchat() { /usr/bin/mqchat -p "$BROKER_PORT" --quiet "$@"; }
mqchat -i bob join room >"$WORK/join.out" || die "mqchat join failed"
mqchat -i alice send room 'hello through the package' || die "mqchat send failed"
mkfifo "$WORK/app.in"
cd "$WORK" # the example writes bob.state here
"$WORK/app/chat_example" 127.0.0.1 "$BROKER_PORT" bob room <"$WORK/app.in" >"$WORK/app.out" \
  2>"$WORK/app.err" &
APP=$!
exec 3>"$WORK/app.in"
wait_for 20 grep -q '^\[room #1\] alice: hello through the package$' "$WORK/app.out" ||
  die "the example did not show alice's message"
echo 'hello from the example' >&3
exec 3>&-
wait_for 20 gone "$APP" || die "the example did not end after its input did"
wait "$APP" || die "the example exited with status $?"
APP=
# 42 MB of messages: more than the default 32 MiB write buffer
# (plugin_opt_write_buffer_mb), so LevelDB's background thread writes a table
# file, after the broker dropped privileges long ago.
line=$(head -c 3000 /dev/zero | tr '\0' 'x')
for ((i = 0; i < 14000; i++)); do echo "$i $line"; done >"$WORK/bulk.in"
mqchat -i alice -W 60 send -l room <"$WORK/bulk.in" || die "mqchat send -l failed"
has_tables() { compgen -G "$STORE/*.ldb" >/dev/null; }
wait_for 20 has_tables ||
  die "LevelDB wrote no table file: $(ls "$STORE")"
mqchat -i alice history room -n 1 >"$WORK/history.out" || die "mqchat history failed"
grep -q '^\[room #14002\] alice: 13999 x' "$WORK/history.out" || die "the last message is not #14002"
# Who owns the store: every file, the background thread's included.
others=$(find "$STORE" ! -user mosquitto -printf '%p (%u)\n')
[ -z "$others" ] || die "store files not owned by mosquitto: $others"
log "chat through the packaged plugin as mosquitto: $(find "$STORE" -type f | wc -l) store" \
  "files, $(compgen -G "$STORE/*.ldb" | wc -l) written by LevelDB's thread, all owned by mosquitto"
stop_broker
others=$(find "$STORE" ! -user mosquitto -printf '%p (%u)\n')
[ -z "$others" ] || die "after the stop, store files not owned by mosquitto: $others"

# --- the web page, its snippet enabled -------------------------------------
# As an operator enables it (docs/web.md), into a conf.d of this test's own
# beside the chat snippet: its two listeners moved to free ports (1883 and
# 9001 may be in use here), nothing else changed.
webconf=$WORK/conf.d-web
mkdir -m 755 "$webconf"
ln -s "$SNIPPET" "$webconf/"
for ((i = 0; i < 50; i++)); do
  mqtt_port=$((20000 + RANDOM % 12000))
  web_port=$((20000 + RANDOM % 12000))
  [ "$mqtt_port" != "$web_port" ] && port_free "$mqtt_port" && port_free "$web_port" && break
done
sed -e "s/^listener 1883 /listener $mqtt_port /" -e "s/^listener 9001 /listener $web_port /" \
  "$WEB_SNIPPET" >"$webconf/mosquitto-chat-web.conf"
sed "s|^include_dir .*|include_dir $webconf|" "$WORK/broker" >"$WORK/broker-web"
start_broker "$WORK/broker-web" "$WORK/broker-web.log"
wait_for 10 port_open "$web_port" || die "nothing listens on the web port $web_port"
timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$web_port && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
  >"$WORK/page.out" 2>/dev/null || true
grep -q 'aria-label="Message"' "$WORK/page.out" || die "no chat page over HTTP on 127.0.0.1:$web_port"
timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$web_port && printf 'GET /vendor/mqtt.min.js HTTP/1.0\r\n\r\n' >&3 && cat <&3" \
  >"$WORK/mqtt.out" 2>/dev/null || true
grep -q 'mqtt' "$WORK/mqtt.out" || die "no MQTT.js over HTTP on 127.0.0.1:$web_port"
listen_addrs "$BROKER_PID" >"$WORK/listening.out"
others=$(grep -v '^127\.0\.0\.1 ' "$WORK/listening.out" || true)
[ -z "$others" ] || die "the broker listens beyond loopback: $others"
grep -q "^127.0.0.1 $web_port\$" "$WORK/listening.out" || die "the web port is not on 127.0.0.1"
log "the enabled web snippet: the page and MQTT.js over HTTP from the installed broker, on" \
  "$(tr '\n' ' ' <"$WORK/listening.out")only"
stop_broker

# --- remove, purge ---------------------------------------------------------
dpkg_wait -r mosquitto-chat >>"$WORK/dpkg.log" 2>&1 || die "dpkg -r failed"
for f in "$PLUGIN" /usr/bin/mqchat; do
  [ ! -e "$f" ] || die "dpkg -r left $f"
done
[ -f "$STORE/CURRENT" ] || die "dpkg -r removed the store"
[ -f "$SNIPPET" ] || die "dpkg -r removed the conffile (dpkg keeps conffiles until purge)"
log "dpkg -r: program files gone; store and snippet kept"
dpkg_wait --purge mosquitto-chat >>"$WORK/dpkg.log" 2>&1 || die "dpkg --purge failed"
INSTALLED=0
[ ! -e "$STORE" ] || die "dpkg --purge left $STORE"
[ ! -e "$BACKUPS" ] || die "dpkg --purge left $BACKUPS (empty)"
[ ! -e "$SNIPPET" ] || die "dpkg --purge left $SNIPPET"
[ ! -e /usr/lib/mosquitto-chat ] || die "dpkg --purge left /usr/lib/mosquitto-chat"
log "dpkg --purge: store and snippet gone"

# --- upgrades from 0.1.0, which named the snippet mosquitto-chat.conf -------
# The stand-in for 0.1.0: the same package name, and as its only file and
# conffile the snippet as 0.1.0 shipped it (no plugin_opt_backup_dir yet),
# its plugin line naming where this package puts the plugin.
mkdir -p "$WORK/old/DEBIAN" "$WORK/old$CONFD"
cat >"$WORK/old/DEBIAN/control" <<EOF
Package: mosquitto-chat
Version: 0.1.0
Architecture: $(dpkg --print-architecture)
Maintainer: $(dpkg-deb -f "$deb" Maintainer)
Description: stand-in for mosquitto-chat 0.1.0 (tests/package.sh)
EOF
echo "$OLD_SNIPPET" >"$WORK/old/DEBIAN/conffiles"
cat >"$WORK/old$OLD_SNIPPET" <<EOF
# mosquitto-chat: loads the chat plugin into this broker. Nothing else here:
# listeners and access control stay as you configured them.
# Every plugin option: $DOC/protocol.md
plugin $PLUGIN
# The store, owned by the user the broker runs as ("mosquitto" for a broker
# started as root, which drops privileges before loading plugins).
plugin_opt_db_path $STORE
# Catch-up pages are small packets: without this they wait on Nagle's algorithm.
set_tcp_nodelay true
EOF
olddeb=$WORK/mosquitto-chat_0.1.0.deb
dpkg-deb --root-owner-group -b "$WORK/old" "$olddeb" >"$WORK/olddeb.log" 2>&1 ||
  die "dpkg-deb could not build the 0.1.0 stand-in"

# install_old: the stand-in, installed as a fresh package.
install_old() {
  INSTALLED=1
  dpkg_wait -i "$olddeb" >>"$WORK/dpkg.log" || die "dpkg -i of the 0.1.0 stand-in failed"
  dpkg-query -W -f='${Conffiles}' mosquitto-chat | grep -q "^ $OLD_SNIPPET " ||
    die "the 0.1.0 stand-in does not own $OLD_SNIPPET as a conffile"
}
# upgrade <case> [dpkg option...]: this package over the stand-in, with no
# terminal (a conffile question would fail it); the old name is gone in
# every case, and so are the traces of the renaming.
upgrade() {
  local c=$1
  shift
  dpkg_wait -i "$@" "$deb" </dev/null >"$WORK/upgrade-$c.out" || die "$c: dpkg -i over 0.1.0 failed"
  cp "$WORK/dpkg.err" "$WORK/upgrade-$c.err"
  [ "$(dpkg-query -W -f='${Version}' mosquitto-chat)" = "$version" ] ||
    die "$c: mosquitto-chat is not $version after the upgrade"
  [ ! -e "$OLD_SNIPPET" ] || die "$c: $OLD_SNIPPET is still there after the upgrade"
  [ ! -e "$OLD_SNIPPET.dpkg-remove" ] || die "$c: $OLD_SNIPPET.dpkg-remove is left over"
  [ ! -e "$OLD_SNIPPET.dpkg-deleted" ] || die "$c: the preinst's $OLD_SNIPPET.dpkg-deleted is left over"
}
# purge_all <case>: dpkg --purge leaves no snippet of any name or suffix.
purge_all() {
  dpkg_wait --purge mosquitto-chat >>"$WORK/dpkg.log" 2>&1 || die "$1: dpkg --purge failed"
  INSTALLED=0
  local left
  left=$(find "$CONFD" -maxdepth 1 -name '*mosquitto-chat.conf*')
  [ -z "$left" ] || die "$1: dpkg --purge left $left"
  [ ! -e "$STORE" ] || die "$1: dpkg --purge left $STORE"
}

# Unedited: dpkg-maintscript-helper deletes it; the new name is this
# version's snippet, as a fresh install has it.
install_old
upgrade unedited
cmp -s "$SNIPPET" "$WORK/snippet.out" || die "unedited: $SNIPPET is not this version's snippet"
[ ! -e "$SNIPPET.dpkg-new" ] || die "unedited: $SNIPPET.dpkg-new is left over"
purge_all unedited
log "upgrade from 0.1.0, snippet unedited: $SNIPPET is this version's, the old name gone"

# Edited (an option added, as docs/install.md tells operators to): the
# edits move to the new name, this version's snippet waits beside it, the
# postinst says so, and the broker loads the plugin from the edited file.
install_old
printf '# the operator: a month of history\nplugin_opt_retention_days 30\n' >>"$OLD_SNIPPET"
cp "$OLD_SNIPPET" "$WORK/edited.conf"
upgrade edited
cmp -s "$SNIPPET" "$WORK/edited.conf" || die "edited: $SNIPPET is not the operator's edited snippet"
cmp -s "$SNIPPET.dpkg-new" "$WORK/snippet.out" ||
  die "edited: $SNIPPET.dpkg-new is not this version's snippet"
grep -q "Preserving user changes to $SNIPPET" "$WORK/upgrade-edited.out" ||
  die "edited: dpkg-maintscript-helper did not say it kept the edits"
grep -q "is $SNIPPET.dpkg-new, which adds plugin_opt_backup_dir" "$WORK/upgrade-edited.err" ||
  die "edited: the postinst did not point to $SNIPPET.dpkg-new"
dpkg-query -W -f='${Conffiles}' mosquitto-chat | grep -q "^ $SNIPPET " ||
  die "edited: $SNIPPET is not a conffile of the package"
include=$(snippet_dir conf.d-upgrade)
sed "s|^include_dir .*|include_dir $include|" "$WORK/broker" >"$WORK/broker-upgrade"
start_broker "$WORK/broker-upgrade" "$WORK/broker-upgrade.log"
grep -q "mosquitto-chat: store \"$STORE\".*retention_days 30," "$WORK/broker-upgrade.log" ||
  die "edited: the broker's start line does not show the operator's retention_days 30"
mqchat -i alice send room 'hello after the upgrade' || die "edited: mqchat send failed"
mqchat -i alice history room -n 1 >"$WORK/history-upgrade.out" || die "edited: mqchat history failed"
grep -q '^\[room #1\] alice: hello after the upgrade$' "$WORK/history-upgrade.out" ||
  die "edited: the message is not #1 of the upgraded broker's store"
stop_broker
purge_all edited
log "upgrade from 0.1.0, snippet edited: the edits in $SNIPPET, this version's beside it" \
  "as .dpkg-new, the broker started with retention_days 30"

# Deleted (the operator's way, before 0.2.0, to keep the plugin out of the
# broker): dpkg keeps a deleted conffile deleted, and the rename does too
# (mv_conffile alone would have installed the new name). The postinst says
# how to get it back; a plain reinstall does not, --force-confmiss does.
install_old
rm "$OLD_SNIPPET"
upgrade deleted
[ ! -e "$SNIPPET" ] ||
  die "deleted: the upgrade installed $SNIPPET, loading the plugin the operator had taken out"
grep -q "you had deleted $OLD_SNIPPET, so $SNIPPET, its new name, is not installed" \
  "$WORK/upgrade-deleted.err" || die "deleted: the postinst did not say why $SNIPPET is missing"
dpkg-query -W -f='${Conffiles}' mosquitto-chat | grep -q "^ $SNIPPET " ||
  die "deleted: $SNIPPET is not a conffile of the package"
dpkg_wait -i "$deb" </dev/null >>"$WORK/dpkg.log" || die "deleted: dpkg -i again failed"
[ ! -e "$SNIPPET" ] || die "deleted: reinstalling the package brought back $SNIPPET"
dpkg_wait -i --force-confmiss "$deb" </dev/null >>"$WORK/dpkg.log" ||
  die "deleted: dpkg -i --force-confmiss failed"
cmp -s "$SNIPPET" "$WORK/snippet.out" || die "deleted: --force-confmiss did not bring back $SNIPPET"
purge_all deleted
log "upgrade from 0.1.0, snippet deleted: neither name after the upgrade nor a reinstall;" \
  "--force-confmiss brings $SNIPPET back"

# Renamed (and edited) by hand to the new name, as the plugin's refusal to
# start behind another plugin advises: a file where the new conffile goes,
# which dpkg keeps as it keeps an edited conffile (--force-confold: what it
# asks otherwise), this version's beside it as .dpkg-dist.
install_old
mv "$OLD_SNIPPET" "$SNIPPET"
printf 'plugin_opt_retention_days 30\n' >>"$SNIPPET"
cp "$SNIPPET" "$WORK/renamed.conf"
upgrade renamed --force-confdef --force-confold
cmp -s "$SNIPPET" "$WORK/renamed.conf" || die "renamed: $SNIPPET is not the operator's file"
cmp -s "$SNIPPET.dpkg-dist" "$WORK/snippet.out" ||
  die "renamed: $SNIPPET.dpkg-dist is not this version's snippet"
purge_all renamed
log "upgrade from 0.1.0, snippet renamed by hand: kept, this version's beside it as .dpkg-dist"
FAILED=0
log "passed"

#!/usr/bin/env bash
# release.sh: scripts/release as docs/install.md says to use it, in a copy of
# the checkout's tracked files: it moves project(... VERSION) and the
# changelog's newest entry together, so that the build configures (the
# package's check of the changelog passes) with the new version; a version
# bumped by hand without its entry stops the configure with the package's
# message; a version not above the current one is refused.
#
#   tests/release.sh [source dir]     (ctest: release_script)
set -euo pipefail
ROOT=$(cd "${1:-$(dirname "$0")/..}" && pwd)
NAME=release
WORK=$(mktemp -d /tmp/mqchat-release.XXXXXX)
# shellcheck source=tests/lib.sh
. "$ROOT/tests/lib.sh"
FAILED=1
cleanup() { if [ "$FAILED" = 0 ]; then rm -rf "$WORK"; else log "kept $WORK"; fi; }
trap cleanup EXIT

git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: $ROOT is no git checkout"; exit 77; }
copy() {
  mkdir -p "$1"
  (cd "$ROOT" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$1"
}
configure() { cmake -S "$1" -B "$1/build" -DCHAT_BUILD_TESTS=OFF -DCHAT_BUILD_CLIENTS=OFF \
  -DCHAT_BUILD_BENCH=OFF >"$WORK/cmake.log" 2>&1; }

copy "$WORK/a"
current=$(sed -n 's/^project(mosquitto-chat VERSION \([0-9.]*\).*/\1/p' "$WORK/a/CMakeLists.txt")
next=99.0.0
(cd "$WORK/a" && scripts/release "$next" "A test entry.") >"$WORK/release.out" ||
  die "scripts/release $next failed"
head -1 "$WORK/a/packaging/deb/changelog" | grep -qx "mosquitto-chat ($next) unstable; urgency=medium" ||
  die "the changelog's newest entry: $(head -1 "$WORK/a/packaging/deb/changelog")"
for f in package.json package-lock.json; do
  [ "$(grep -c "\"version\": \"$next\"" "$WORK/a/$f")" = "$([ $f = package.json ] && echo 1 || echo 2)" ] ||
    die "$f does not name $next: $(grep -m2 '"version"' "$WORK/a/$f" | tr -d '\n')"
done
cmp -s <(grep -v '"version"' "$ROOT/package-lock.json") <(grep -v '"version"' "$WORK/a/package-lock.json") ||
  die "scripts/release changed package-lock.json beyond its version lines"
configure "$WORK/a" || die "the build does not configure after scripts/release"
grep -qx "CMAKE_PROJECT_VERSION:STATIC=$next" "$WORK/a/build/CMakeCache.txt" ||
  die "the configured version is not $next"
(cd "$WORK/a" && scripts/release "$current" "Back.") >/dev/null 2>&1 &&
  die "scripts/release accepted $current, below $next"
log "scripts/release $next: the version and the changelog move together; the build configures"

copy "$WORK/b"
sed -i "s/^project(mosquitto-chat VERSION $current/project(mosquitto-chat VERSION $next/" \
  "$WORK/b/CMakeLists.txt"
configure "$WORK/b" && die "a version without its changelog entry configured"
grep -q "add an entry" "$WORK/cmake.log" || die "no 'add an entry' from the package's check"
log "by hand, without a changelog entry: the configure stops and says so"
FAILED=0
log "passed"

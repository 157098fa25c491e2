#!/usr/bin/env bash
# Builds the fuzz targets of fuzz/ with Debian's clang (libFuzzer, ASan,
# UBSan) and runs them:
#
#   fuzz/run.sh <seconds>     fuzz each target for <seconds>, as many at once
#                             as there are cores; fails on any crash
#   fuzz/run.sh --regress     run every seed, regression input and saved crash
#                             once (no fuzzing)
#
# Each target starts from its committed seeds (fuzz/corpus/<target>) and
# regression inputs (fuzz/regress/<target>); what it learns goes to
# $FUZZ_OUT/work/<target> (default build-fuzz/out), never into the committed
# corpus. A crash is saved as $FUZZ_OUT/crashes/<target>/crash-<sha1> and
# its log kept in $FUZZ_OUT/logs/<target>.log. Once the cause is fixed, copy
# the crash into fuzz/regress/<target>/ under a name that says what it was:
# from then on every build runs it (ctest's fuzz_seeds_<target>).
#
# Environment: FUZZ_BUILD (default build-fuzz), FUZZ_TARGETS (default all),
# FUZZ_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:?usage: fuzz/run.sh <seconds> | --regress}
build=${FUZZ_BUILD:-build-fuzz}
out=${FUZZ_OUT:-$build/out}
targets=(${FUZZ_TARGETS:-envelope control ack names config})
jobs=${FUZZ_JOBS:-$(nproc)}

rm -f "$build/CMakeCache.txt"
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHAT_WERROR=ON -DCHAT_FUZZ=ON \
  -DCHAT_BUILD_TESTS=OFF -DCHAT_BUILD_CLIENTS=OFF -DCHAT_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target fuzzers >/dev/null

# The targets that read JSON get its tokens.
dict_for() {
  case $1 in envelope | control | names) echo "-dict=fuzz/json.dict" ;; esac
}

run_one() {
  local t=$1 log="$out/logs/$1.log"
  mkdir -p "$out/work/$t" "$out/crashes/$t" "$out/logs"
  local args=(-artifact_prefix="$out/crashes/$t/" -timeout=10 -rss_limit_mb=2048
              -print_final_stats=1 $(dict_for "$t"))
  local inputs=(fuzz/corpus/"$t")
  [ -d fuzz/regress/"$t" ] && inputs+=(fuzz/regress/"$t")
  if [ "$mode" = --regress ]; then
    # Every input once; the saved crashes too, file by file.
    local crashes=("$out/crashes/$t"/crash-*)
    [ -e "${crashes[0]}" ] || crashes=()
    "$build/fuzz/fuzz_$t" "${args[@]}" -runs=0 "${inputs[@]}" >"$log" 2>&1 &&
      { [ ${#crashes[@]} -eq 0 ] || "$build/fuzz/fuzz_$t" "${args[@]}" "${crashes[@]}" >>"$log" 2>&1; }
  else
    "$build/fuzz/fuzz_$t" "${args[@]}" -max_total_time="$mode" "$out/work/$t" "${inputs[@]}" \
      >"$log" 2>&1
  fi
}

# In batches of $jobs: every target gets the same time, alone on a core.
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    [ -x "$build/fuzz/fuzz_$t" ] || { echo "fuzz/run.sh: no target $t" >&2; exit 2; }
    run_one "$t" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    t=${batch[$k]}
    if wait "${pids[$k]}"; then
      runs=$(awk '/^stat::number_of_executed_units/ {print $2}' "$out/logs/$t.log")
      echo "fuzz $t: ok${runs:+, $runs runs}"
    else
      failed+=("$t")
      echo "fuzz $t: FAILED (log: $out/logs/$t.log)"
      grep -E 'check failed|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' \
        "$out/logs/$t.log" | head -5 | sed 's/^/    /'
      ls "$out/crashes/$t" 2>/dev/null | sed "s|^|    saved: $out/crashes/$t/|"
    fi
  done
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz/run.sh: ${#failed[*]} target(s) failed: ${failed[*]}" >&2; exit 1; }

#!/bin/sh
# bad_options.sh MOSQUITTO PLUGIN: every bad plugin_opt value stops the broker
# at start, with a log line that names the option; a good set starts it.
# (store postgresql without pg_conninfo is bad too.)
set -u
mosquitto=$1
plugin=$2
dir=$(mktemp -d /tmp/chat-badopt.XXXXXX)
trap 'rm -rf "$dir"' EXIT
failures=0

# try NAME VALUE [SECONDS]: writes a config with that one option and runs the
# broker for at most SECONDS (exit 124 when it was still running then).
try() {
  cat > "$dir/m.conf" <<CONF
listener 0 127.0.0.1
allow_anonymous true
user root
log_dest stderr
plugin $plugin
plugin_opt_db_path $dir/db
plugin_opt_$1 $2
CONF
  # The sanitizer build's plugin needs its runtime preloaded into the broker.
  LD_PRELOAD=${CHAT_BROKER_PRELOAD:-} timeout "${3:-10}" "$mosquitto" -c "$dir/m.conf" \
    > "$dir/out" 2>&1
}

for case in "page_size 0" "page_size 100001" "page_size 12x" "page_bytes 10" \
            "page_qos 3" "replay_window 0" "replay_window 65" "replay_timeout 0" \
            "max_payload -1" "fsync sometimes" "replay yes" "open_groups 1" \
            "topic_prefix a/b" "topic_prefix chat+" "retention_count -5" \
            "retention_days x" "acl maybe" "no_such_option 1" "page_bytes 268435456" \
            "max_payload 50000000" "write_buffer_mb 0" "read_check sometimes" "verify_store maybe" "store mysql" "store postgresql" \
            "recall_seconds -1" "edit_seconds 31536001" "recall_seconds 2m" \
            "push_allow http://push.example/" "push_allow ftp://push.example/" \
            "push_allow https://u@push.example/" "push_delay -1" "push_delay 3600001" \
            "push_interval x" "push_body yes" "push_webhooks ops" "push_webhooks =https://a.example/" \
            "push_webhooks ops=http://hooks.example/" "push_nothing 1"; do
  set -- $case
  try "$1" "$2"
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
    echo "FAIL: plugin_opt_$1 $2 did not stop the broker (exit $rc)"; failures=$((failures+1))
  elif ! grep -q "plugin_opt_$1" "$dir/out"; then
    echo "FAIL: plugin_opt_$1 $2: no log line names the option:"; cat "$dir/out"
    failures=$((failures+1))
  else
    echo "ok: plugin_opt_$1 $2 -> $(grep "plugin_opt_$1" "$dir/out" | head -1)"
  fi
done

# A good value must not be refused: the broker runs until the timeout.
try push_allow "https://push.example/ http://127.0.0.1:9/" 3
rc=$?
if [ $rc -ne 124 ]; then
  echo "FAIL: a valid push_allow stopped the broker (exit $rc):"; cat "$dir/out"; failures=$((failures+1))
else
  echo "ok: plugin_opt_push_allow accepted"
fi
try page_size 7 3
rc=$?
if [ $rc -ne 124 ]; then
  echo "FAIL: a valid option stopped the broker (exit $rc):"; cat "$dir/out"; failures=$((failures+1))
else
  echo "ok: plugin_opt_page_size 7 accepted"
fi
echo "$failures failed"
[ $failures -eq 0 ]

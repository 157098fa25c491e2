#!/bin/sh
# pgcluster.sh: a throwaway PostgreSQL 15 cluster for the tests, on
# 127.0.0.1 only, in a directory of the caller's. PostgreSQL refuses to run
# as root, so as root every command runs as the `postgres` user (Debian's
# postgresql package creates it) and the directory is given to it.
#
#   pgcluster.sh init DIR PORT [sync]   initdb, then start (sync: a synchronous standby is
#                                       expected, named "standby")
#   pgcluster.sh standby PRIMARY_PORT DIR PORT
#                                       a streaming standby of the primary, started
#   pgcluster.sh start DIR | stop DIR [fast|immediate] | promote DIR
#   pgcluster.sh createdb PORT NAME
#   pgcluster.sh sql CONNINFO SQL      runs SQL in the database (a test's damage)
set -eu
BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

own() {
  mkdir -p "$1"
  [ "$(id -u)" -ne 0 ] || chown postgres "$1"
  chmod 700 "$1"
}

conf() { # DIR PORT
  cat >>"$1/data/postgresql.conf" <<CONF
port = $2
listen_addresses = '127.0.0.1'
unix_socket_directories = '$1'
fsync = on
max_connections = 200
shared_buffers = 64MB
wal_level = replica
max_wal_senders = 5
hot_standby = on
log_min_messages = warning
CONF
}

cmd=$1
shift
case $cmd in
init)
  dir=$1 port=$2
  own "$dir"
  as_pg "$BIN/initdb" -D "$dir/data" -E UTF8 --locale=C -A trust -U postgres >"$dir/initdb.log" 2>&1
  conf "$dir" "$port"
  echo "host replication postgres 127.0.0.1/32 trust" >>"$dir/data/pg_hba.conf"
  if [ "${3:-}" = sync ]; then
    echo "synchronous_standby_names = 'standby'" >>"$dir/data/postgresql.conf"
  fi
  as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null
  ;;
standby)
  pport=$1 dir=$2 port=$3
  own "$dir"
  as_pg "$BIN/pg_basebackup" -h 127.0.0.1 -p "$pport" -U postgres -D "$dir/data" -R \
    -d "host=127.0.0.1 port=$pport user=postgres application_name=standby" >"$dir/basebackup.log" 2>&1
  # the primary's settings came along: only the port and socket differ
  sed -i '/^port = /d; /^unix_socket_directories = /d; /^synchronous_standby_names/d' \
    "$dir/data/postgresql.conf"
  printf "port = %s\nunix_socket_directories = '%s'\n" "$port" "$dir" >>"$dir/data/postgresql.conf"
  as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 start >/dev/null
  ;;
start)
  as_pg "$BIN/pg_ctl" -D "$1/data" -l "$1/log" -w -t 60 start >/dev/null
  ;;
stop)
  as_pg "$BIN/pg_ctl" -D "$1/data" -m "${2:-fast}" -w -t 60 stop >/dev/null
  ;;
promote)
  as_pg "$BIN/pg_ctl" -D "$1/data" -w -t 60 promote >/dev/null
  ;;
createdb)
  "$BIN/createdb" -h 127.0.0.1 -p "$1" -U postgres "$2" 2>/dev/null ||
    as_pg "$BIN/createdb" -h 127.0.0.1 -p "$1" -U postgres "$2"
  ;;
sql)
  "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -d "$1" -c "$2" >/dev/null
  ;;
*)
  echo "pgcluster.sh: unknown command $cmd" >&2
  exit 2
  ;;
esac

#!/usr/bin/env bash
# Throw-away PostgreSQL cluster for the `postgres`-marked tests (graph store, index, LightRAG).
#
#   .ci/postgres.sh install           install Debian's postgresql if its binaries are missing
#                                     (as root; otherwise it says so and exits 0)
#   .ci/postgres.sh start DIR PORT    initdb in DIR, start on 127.0.0.1:PORT, create user+db "e2rag"
#   .ci/postgres.sh stop DIR          stop the cluster started in DIR
#
# PostgreSQL refuses to run as root, so when invoked as root the server commands run as the
# `postgres` system user (created by the Debian package). Password auth for TCP clients; the
# socket lives in DIR so nothing touches the system cluster.
set -euo pipefail

PG_BIN="${PG_BIN:-}"
if [[ -z "$PG_BIN" ]]; then
  for candidate in /usr/lib/postgresql/*/bin; do
    [[ -x "$candidate/initdb" ]] && PG_BIN="$candidate"
  done
fi
DB_NAME="${E2RAG_PG_DB:-e2rag}"
DB_USER="${E2RAG_PG_USER:-e2rag}"
DB_PASSWORD="${E2RAG_PG_PASSWORD:-e2rag}"

as_server_user() {
  if [[ "$(id -u)" == "0" ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

require_bin() {
  if [[ -z "$PG_BIN" || ! -x "$PG_BIN/initdb" ]]; then
    echo "postgres.sh: PostgreSQL binaries not found (run '$0 install')" >&2
    exit 2
  fi
}

cmd="${1:-}"
case "$cmd" in
  install)
    if [[ -n "$PG_BIN" && -x "$PG_BIN/initdb" ]]; then
      echo "postgres.sh: found $PG_BIN"
      exit 0
    fi
    if [[ "$(id -u)" != "0" ]]; then
      # not fatal: without a server the postgres tests skip (and fail under CI=true)
      echo "postgres.sh: PostgreSQL binaries missing and not root: the postgres tests will skip" >&2
      exit 0
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    echo "postgres.sh: installed Debian's postgresql"
    ;;
  start)
    require_bin
    dir="${2:?usage: postgres.sh start DIR PORT}"
    port="${3:?usage: postgres.sh start DIR PORT}"
    mkdir -p "$dir"
    chmod 0700 "$dir"
    if [[ "$(id -u)" == "0" ]]; then chown postgres "$dir"; fi
    pwfile="$dir/pwfile"
    (umask 077 && echo "$DB_PASSWORD" > "$pwfile")
    if [[ "$(id -u)" == "0" ]]; then chown postgres "$pwfile"; fi
    as_server_user "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 --pwfile="$pwfile" -E UTF8 >"$dir/initdb.log" 2>&1
    as_server_user "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
    as_server_user "$PG_BIN/psql" -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -q \
      -c "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD';" \
      -c "CREATE DATABASE $DB_NAME OWNER $DB_USER;"
    echo "postgres.sh: started on 127.0.0.1:$port (db=$DB_NAME user=$DB_USER)"
    ;;
  stop)
    require_bin
    dir="${2:?usage: postgres.sh stop DIR}"
    if [[ -f "$dir/data/postmaster.pid" ]]; then
      as_server_user "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    ;;
  *)
    echo "usage: $0 install | start DIR PORT | stop DIR" >&2
    exit 64
    ;;
esac

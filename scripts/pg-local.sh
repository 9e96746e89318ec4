#!/usr/bin/env bash
# Prints the admin URL of a PostgreSQL server for development and tests,
# starting a throwaway cluster under the repository when there is none.
#
# Usage:
#   scripts/pg-local.sh             print an admin URL (DATABASE_URL if set)
#   scripts/pg-local.sh --db NAME   create database NAME if missing, print its URL
#   scripts/pg-local.sh stop        stop the throwaway cluster, if it runs
#   scripts/pg-local.sh bindir      print the directory of the PostgreSQL binaries
#   scripts/pg-local.sh test        print the admin URL for the test suite
#   scripts/pg-local.sh test-stop   stop the test suite's cluster, if it runs
#
# In order: DATABASE_URL if set; else a server answering on 127.0.0.1:5432
# (user postgres, trust auth, as a distribution's package sets it up);
# else the throwaway cluster in .pgdata/ on 127.0.0.1:54329, created and
# started as needed, so a machine with only the server binaries works.
#
# The test suite (make test) does not share a server: `test` prints
# DATABASE_URL if set, else starts a cluster of its own in .pgdata-test/ on
# 127.0.0.1:54328 (PG_TEST_PORT), tuned for throwaway data: fsync and
# synchronous_commit off, so that the suite's thousand CREATE and DROP
# DATABASEs (each DROP forces a checkpoint) and its commits do not wait for
# the disk, and 300 connections for the suite's parallel servers. Its data
# survives any crash but the operating system's, which a test suite can
# afford; a development server's cluster keeps fsync on.
#
# Environment: PG_LOCAL_FORCE=1 skips the probe of port 5432 (to use the
# throwaway cluster regardless); PG_LOCAL_PORT changes its port; PG_BINDIR
# names the directory of initdb/pg_ctl/psql.
#
# Only the URL goes to stdout, so callers can write URL=$(scripts/pg-local.sh).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${PG_LOCAL_PORT:-54329}
default_url="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
local_url="postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"

log() { echo "pg-local: $*" >&2; }
die() { log "$*"; exit 1; }

# find_bindir prints the directory holding initdb, pg_ctl and psql. Debian
# keeps them off PATH in /usr/lib/postgresql/<major>/bin, and its pg_config
# may belong to libpq-dev without a server next to it, hence the checks.
find_bindir() {
	local d
	if [[ -n ${PG_BINDIR:-} ]]; then
		echo "$PG_BINDIR"
		return
	fi
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir 2>/dev/null || true)
		if [[ -n $d && -x $d/initdb ]]; then
			echo "$d"
			return
		fi
	fi
	# Resolved, because an initdb on PATH may be a lone symbolic link into
	# the real directory.
	if command -v initdb >/dev/null 2>&1; then
		d=$(dirname "$(readlink -f "$(command -v initdb)")")
		if [[ -x $d/pg_ctl ]]; then
			echo "$d"
			return
		fi
	fi
	# Highest major version first.
	for d in $(ls -d /usr/lib/postgresql/*/bin /usr/local/pgsql/bin /opt/homebrew/opt/postgresql*/bin \
		/usr/local/opt/postgresql*/bin 2>/dev/null | sort -t/ -k4,4 -V -r); do
		if [[ -x $d/initdb ]]; then
			echo "$d"
			return
		fi
	done
	return 1
}

# answers HOST PORT succeeds when a PostgreSQL server accepts connections.
answers() {
	if [[ -n ${bindir:-} && -x $bindir/pg_isready ]]; then
		"$bindir/pg_isready" -q -h "$1" -p "$2" -t 2
	else
		# Without client binaries, an open TCP port is the best evidence.
		(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
	fi
}

# with_db URL NAME prints URL with its database replaced by NAME.
with_db() {
	case $1 in
	postgres://* | postgresql://*)
		# scheme://authority, then the optional /path, then ?query.
		sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$2#" <<<"$1"
		;;
	*) echo "$1 dbname=$2" ;;
	esac
}

# as_owner runs a command as the cluster's owner: Postgres refuses to run
# as root, so root hands the cluster to an unprivileged system user.
as_owner() {
	if [[ $(id -u) -ne 0 ]]; then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		# From /, as the owner may not be allowed into the current directory.
		(cd / && runuser -u "$owner" -- "$@")
	else
		(cd / && su -s /bin/sh "$owner" -c "$(printf '%q ' "$@")")
	fi
}

# choose_root sets pgroot, the directory of the throwaway cluster, and owner.
# It is .pgdata/ in the repository unless the repository lies where the
# unprivileged owner cannot reach (a checkout under /root); then it is a
# directory in /tmp named after the checkout, linked from .pgdata.
choose_root() {
	pgroot="$repo/${pgname:-.pgdata}"
	owner=$(id -un)
	[[ $(id -u) -eq 0 ]] || return 0
	if id postgres >/dev/null 2>&1; then
		owner=postgres
	else
		owner=nobody
	fi
	if [[ -L $pgroot ]]; then
		pgroot=$(readlink "$pgroot")
		return 0
	fi
	if as_owner test -x "$repo" 2>/dev/null; then
		return 0
	fi
	local alt="/tmp/holdpoint-${pgname:-.pgdata}-$(cksum <<<"$repo" | cut -d' ' -f1)"
	[[ -e $pgroot ]] || ln -s "$alt" "$pgroot"
	pgroot=$alt
}

# start_local creates (once) and starts (if stopped) the throwaway cluster.
start_local() {
	[[ -n ${bindir:-} ]] || die "no PostgreSQL server binaries found (install them, set PG_BINDIR, or set DATABASE_URL)"
	choose_root
	local data="$pgroot/data"
	mkdir -p "$pgroot"
	if [[ $(id -u) -eq 0 ]]; then
		chown "$owner" "$pgroot"
		chmod 700 "$pgroot"
	fi
	# Two make targets may start at once: one creates, the other waits.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$pgroot/.lock"
		flock 9
	fi
	if answers 127.0.0.1 "$port"; then
		return 0
	fi
	if [[ ! -f $data/PG_VERSION ]]; then
		log "creating a throwaway cluster in $data (owner $owner)"
		# Trust on loopback only: the cluster listens on 127.0.0.1 and no
		# unix socket, and holds nothing but development data.
		as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C >"$pgroot/initdb.log" 2>&1 ||
			{ cat "$pgroot/initdb.log" >&2; die "initdb failed"; }
		cat >>"$data/postgresql.conf" <<-EOF

			# Written by scripts/pg-local.sh for a local development cluster.
			listen_addresses = '127.0.0.1'
			port = $port
			unix_socket_directories = ''
			max_connections = ${pgmaxconns:-200}
		EOF
		[[ -z ${pgextra:-} ]] || printf '%s\n' "$pgextra" >>"$data/postgresql.conf"
	fi
	log "starting the throwaway cluster on 127.0.0.1:$port (log: $pgroot/postgres.log)"
	# 9>&-: the server must not inherit the lock, or it would hold it for
	# its whole life and the next run would wait forever.
	as_owner "$bindir/pg_ctl" -D "$data" -l "$pgroot/postgres.log" -w -t 60 start >&2 9>&- ||
		{ tail -n 20 "$pgroot/postgres.log" >&2 || true; die "pg_ctl start failed"; }
}

stop_local() {
	choose_root
	if [[ ! -f $pgroot/data/postmaster.pid ]]; then
		log "the throwaway cluster is not running"
		return 0
	fi
	[[ -n ${bindir:-} ]] || die "no PostgreSQL server binaries found"
	as_owner "$bindir/pg_ctl" -D "$pgroot/data" -w -m fast stop >&2
}

# admin_url prints the URL of the server to use, starting one if needed.
admin_url() {
	if [[ -n ${DATABASE_URL:-} ]]; then
		echo "$DATABASE_URL"
	elif [[ -z ${PG_LOCAL_FORCE:-} ]] && answers 127.0.0.1 5432; then
		echo "$default_url"
	else
		start_local
		echo "$local_url"
	fi
}

# create_db URL NAME creates database NAME on the server at URL if missing.
create_db() {
	local psql=psql
	[[ -n ${bindir:-} && -x $bindir/psql ]] && psql=$bindir/psql
	command -v "$psql" >/dev/null 2>&1 || die "psql not found; create database $2 yourself"
	local exists
	# NAME was checked against [a-z_][a-z0-9_]*, so it can be inlined.
	exists=$("$psql" "$1" -XAtq -v ON_ERROR_STOP=1 -c "SELECT 1 FROM pg_database WHERE datname = '$2'")
	if [[ $exists != 1 ]]; then
		log "creating database $2"
		# A concurrent creator wins the race harmlessly: re-check on failure.
		"$psql" "$1" -XAtq -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$2\"" >&2 ||
			[[ $("$psql" "$1" -XAtq -c "SELECT 1 FROM pg_database WHERE datname = '$2'") == 1 ]]
	fi
}

bindir=$(find_bindir || true)

case ${1:-} in
"")
	admin_url
	;;
--db)
	[[ -n ${2:-} ]] || die "usage: $0 --db NAME"
	[[ $2 =~ ^[a-z_][a-z0-9_]*$ ]] || die "database name must match [a-z_][a-z0-9_]*"
	url=$(admin_url)
	create_db "$url" "$2"
	with_db "$url" "$2"
	;;
stop)
	stop_local
	;;
test)
	if [[ -n ${DATABASE_URL:-} ]]; then
		echo "$DATABASE_URL"
		exit 0
	fi
	pgname=.pgdata-test port=${PG_TEST_PORT:-54328} pgmaxconns=300
	pgextra=$'fsync = off\nsynchronous_commit = off\nfull_page_writes = off'
	start_local
	echo "postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"
	;;
test-stop)
	pgname=.pgdata-test
	stop_local
	;;
bindir)
	[[ -n ${bindir:-} ]] || die "no PostgreSQL binaries found"
	echo "$bindir"
	;;
*)
	die "usage: $0 [--db NAME | stop | bindir | test | test-stop]"
	;;
esac

#!/usr/bin/env bash
# Runs the Genkit JS client compatibility tests against a fresh server.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable bash tests/compat/run.sh
#
# DATABASE_URL must be a URL whose user may create databases. The script
# creates a throwaway database, builds and starts `platform serve --dev` on a
# free loopback port (serve migrates at start-up), runs `node --test` here,
# and always stops the server and drops the database. Its exit code is the
# tests' result. Extra arguments are passed to `node --test` (e.g. a file).
set -euo pipefail

: "${DATABASE_URL:?set DATABASE_URL to an admin URL, e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}"
case "$DATABASE_URL" in
postgres://* | postgresql://*) ;;
*)
	echo "run.sh: DATABASE_URL must be a postgres:// URL" >&2
	exit 2
	;;
esac
for tool in go node npm psql; do
	command -v "$tool" >/dev/null || {
		echo "run.sh: $tool is required" >&2
		exit 2
	}
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
db="holdpoint_compat_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
server_pid=""
db_created=""

cleanup() {
	local rc=$?
	set +e
	if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill -TERM "$server_pid" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -0 "$server_pid" 2>/dev/null && kill -KILL "$server_pid" 2>/dev/null
		wait "$server_pid" 2>/dev/null
	fi
	if [[ $rc -ne 0 && -s "$tmp/server.log" ]]; then
		echo "--- last lines of the server log ---" >&2
		tail -n 60 "$tmp/server.log" >&2
	fi
	if [[ -n "$db_created" ]]; then
		psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null ||
			echo "run.sh: could not drop database $db" >&2
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "run.sh: building the platform"
(cd "$root" && go build -o "$tmp/platform" ./cmd/platform)

psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$db\"" >/dev/null
db_created=1
db_url=$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$DATABASE_URL" "$db")

port=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
base="http://127.0.0.1:$port"

echo "run.sh: starting the server on $base (database $db)"
DATABASE_URL="$db_url" "$tmp/platform" serve --dev --addr "127.0.0.1:$port" >"$tmp/server.log" 2>&1 &
server_pid=$!

alive() {
	kill -0 "$server_pid" 2>/dev/null || return 1
	! grep -qs '^State:[[:space:]]*Z' "/proc/$server_pid/status"
}
ready() {
	node -e 'fetch(process.argv[1]).then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))' "$base/readyz"
}
deadline=$((SECONDS + 30))
until ready; do
	if ! alive; then
		echo "run.sh: the server exited before it was ready" >&2
		exit 1
	fi
	if ((SECONDS >= deadline)); then
		echo "run.sh: the server was not ready within 30 s" >&2
		exit 1
	fi
	sleep 0.3
done

cd "$here"
# npm keeps a copy of the installed lock file in node_modules; reinstall when
# it is missing or older than the lock file or the manifest.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json || package.json -nt node_modules/.package-lock.json ]]; then
	echo "run.sh: installing the client (npm ci)"
	npm ci --no-audit --no-fund --ignore-scripts
fi

echo "run.sh: running the client tests"
rc=0
HOLDPOINT_URL="$base" node --test --test-reporter=tap --test-timeout=60000 "$@" || rc=$?
exit "$rc"

#!/usr/bin/env bash
# Runs the Genkit JS client compatibility tests against a fresh server.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable bash tests/compat/run.sh
#
# DATABASE_URL must be a URL whose user may create databases. The script
# creates a throwaway database, builds and starts `platform serve --dev` on a
# free loopback port (serve migrates at start-up), a second server that
# requires credentials (with a client key of its own tenant), and the seed's
# banking agent built as a program outside the module (examples/banking
# with a go.mod of its own) on a database of its own, and the custom agent
# of examples/missingfield on another; runs `node --test`
# here, and always stops the servers and drops the databases. Its exit code is the
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
server_pids=""
dbs_created=""

cleanup() {
	local rc=$?
	set +e
	for pid in $server_pids; do
		kill -0 "$pid" 2>/dev/null || continue
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	if [[ $rc -ne 0 ]]; then
		for log in "$tmp"/server*.log; do
			[[ -s "$log" ]] || continue
			echo "--- last lines of $(basename "$log") ---" >&2
			tail -n 60 "$log" >&2
		done
	fi
	for name in $dbs_created; do
		psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null ||
			echo "run.sh: could not drop database $name" >&2
	done
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "run.sh: building the platform"
(cd "$root" && go build -o "$tmp/platform" ./cmd/platform)

# The seed's banking agent as a user's own program: examples/banking/main.go
# alone in a directory whose go.mod requires this module through a replace.
echo "run.sh: building examples/banking as a program outside the module"
mkdir -p "$tmp/outside"
cp "$root/examples/banking/main.go" "$root/go.sum" "$tmp/outside/"
printf 'module example.com/mybank\n\ngo 1.26\n\nrequire github.com/holdpoint/holdpoint v0.0.0-00010101000000-000000000000\n\nreplace github.com/holdpoint/holdpoint => %s\n' "$root" >"$tmp/outside/go.mod"
(cd "$tmp/outside" && GOFLAGS=-mod=mod GOWORK=off go build -o "$tmp/mybank" .)
(cd "$root" && go build -o "$tmp/receiver" ./examples/tenant/receiver && go build -o "$tmp/hostilemodel" ./internal/hostile/cmd/hostilemodel &&
	go build -o "$tmp/missingfield" ./examples/missingfield)

# create_db NAME: creates a throwaway database (dropped at exit) and sets
# created_url to its URL.
create_db() {
	psql "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$1\"" >/dev/null
	dbs_created="$dbs_created $1"
	created_url=$(node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$DATABASE_URL" "$1")
}
create_db "$db"
db_url=$created_url
create_db "${db}_seed"
seed_db_url=$created_url
create_db "${db}_hostile"
hostile_db_url=$created_url
create_db "${db}_shipping"
shipping_db_url=$created_url

free_port() {
	node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'
}

# start_server NAME BINARY DATABASE_URL ARGS...: starts `BINARY serve ARGS`
# on a free loopback port, logging to $tmp/NAME.log, and waits until it is
# ready; sets url and started_pid.
start_server() {
	local name=$1 bin=$2 database=$3 port pid deadline
	shift 3
	port=$(free_port)
	url="http://127.0.0.1:$port"
	echo "run.sh: starting $name on $url"
	DATABASE_URL="$database" "$bin" serve --addr "127.0.0.1:$port" "$@" >"$tmp/$name.log" 2>&1 &
	pid=$!
	server_pids="$server_pids $pid"
	started_pid=$pid
	# Bounded, but for a loaded machine: each server migrates its database
	# and warms its pool first, beside the Go tests, and one took over 30 s.
	deadline=$((SECONDS + 180))
	until node -e 'fetch(process.argv[1]).then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))' "$url/readyz"; do
		if ! kill -0 "$pid" 2>/dev/null || grep -qs '^State:[[:space:]]*Z' "/proc/$pid/status"; then
			echo "run.sh: $name exited before it was ready" >&2
			exit 1
		fi
		if ((SECONDS >= deadline)); then
			echo "run.sh: $name was not ready within 180 s" >&2
			exit 1
		fi
		sleep 0.3
	done
}

# The server most tests use: dev mode, the default tenant, no credential;
# and a second one on the same database, for streams.test.mjs to rejoin a
# stream on. Both hold the demo's gated streams on files in $tmp/gates.
mkdir -p "$tmp/gates"
HOLDPOINT_DEMO_STREAM_GATES="$tmp/gates" start_server server "$tmp/platform" "$db_url" --dev
base=$url
HOLDPOINT_DEMO_STREAM_GATES="$tmp/gates" start_server server-dev2 "$tmp/platform" "$db_url" --dev
base2=$url
# A second server on the same database that requires credentials, with a
# client key of its own tenant, for the tests of authentication.
tenant=$(DATABASE_URL="$db_url" "$tmp/platform" tenants create compat-auth)
auth_key=$(DATABASE_URL="$db_url" "$tmp/platform" keys create --tenant "$tenant" --role client --name compat | grep -o 'hp_[A-Za-z0-9_-]*' | head -n1)
if [[ -z "$auth_key" ]]; then
	echo "run.sh: could not create a client key for the authenticated server" >&2
	exit 1
fi
# Admin keys of the same tenant for the approval policies' tests: two
# approvers holding approve:payments, and a key without it.
admin_key() {
	DATABASE_URL="$db_url" "$tmp/platform" keys create --tenant "$tenant" --role admin "$@" | grep -o 'hp_[A-Za-z0-9_-]*' | head -n1
}
approver_keys="$(admin_key --name approver-one --scope approve:payments),$(admin_key --name approver-two --scope approve:payments)"
stranger_key=$(admin_key --name stranger --scope approve:other)
# Every instance on a database delivers its webhook outbox, so this one must
# allow the loopback receivers of webhooks.test.mjs as the dev server does
# (else it may claim a delivery and refuse it).
start_server server-auth "$tmp/platform" "$db_url" --demo --allow-loopback-webhooks
auth_base=$url
start_server server-seed "$tmp/mybank" "$seed_db_url" --dev
seed_base=$url
# A custom agent (a Go function per turn) that books through a journaled
# tool: examples/missingfield, for customagent.test.mjs.
start_server server-shipping "$tmp/missingfield" "$shipping_db_url" --dev
shipping_base=$url

# A tenant's own agent: examples/tenant/banking.prompt (renamed, since the
# dev server's demo agent is bankingAgent) applied to the default tenant,
# its transferMoney on the example receiver, which checks the tenant's
# signature.
recv_port=$(free_port)
recv_base="http://127.0.0.1:$recv_port"
tool_secret=$(DATABASE_URL="$db_url" "$tmp/platform" tenants tool-secret --tenant default | head -n1 | cut -f1)
TOOL_SECRET="$tool_secret" "$tmp/receiver" --addr "127.0.0.1:$recv_port" >"$tmp/server-receiver.log" 2>&1 &
server_pids="$server_pids $!"
sed -e 's/^name: bankingAgent$/name: tenantBanking/' -e "s#http://127.0.0.1:8090#$recv_base#" \
	"$root/examples/tenant/banking.prompt" >"$tmp/tenantBanking.prompt"
DATABASE_URL="$db_url" "$tmp/platform" agents apply -f "$tmp/tenantBanking.prompt" --tenant default --allow-loopback-tools
for _ in $(seq 50); do
	node -e 'fetch(process.argv[1]).then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))' "$recv_base/calls" && break
	sleep 0.2
done

# The attacker: a dev server whose tenant agent "steered" runs on an
# OpenAI-compatible model that requests whatever the user's message names
# (internal/hostile), with the example receiver as its transferMoney.
hostile_port=$(free_port)
"$tmp/hostilemodel" --addr "127.0.0.1:$hostile_port" >"$tmp/server-hostilemodel.log" 2>&1 &
server_pids="$server_pids $!"
OPENAI_API_KEY=attacker OPENAI_BASE_URL="http://127.0.0.1:$hostile_port/v1" HOLDPOINT_MODEL=openai/gpt-4o-mini \
	start_server server-hostile "$tmp/platform" "$hostile_db_url" --dev --rate-limit 0 --max-interrupts-per-turn 8
hostile_base=$url
hostile_recv_port=$(free_port)
hostile_recv_base="http://127.0.0.1:$hostile_recv_port"
hostile_secret=$(DATABASE_URL="$hostile_db_url" "$tmp/platform" tenants tool-secret --tenant default | head -n1 | cut -f1)
TOOL_SECRET="$hostile_secret" "$tmp/receiver" --addr "127.0.0.1:$hostile_recv_port" >"$tmp/server-hostile-receiver.log" 2>&1 &
server_pids="$server_pids $!"
sed -e 's/^name: bankingAgent$/name: steered/' -e 's/^model: demo$/model: openai\/gpt-4o-mini/' -e "s#http://127.0.0.1:8090#$hostile_recv_base#" \
	"$root/examples/tenant/banking.prompt" >"$tmp/steered.prompt"
DATABASE_URL="$hostile_db_url" OPENAI_API_KEY=attacker "$tmp/platform" agents apply -f "$tmp/steered.prompt" --tenant default --allow-loopback-tools

# Two instances on a database of their own for takeover.test.mjs, which
# kills the first (-9) once its detached approval moved the money. Their
# demo model gives every tool request a new ref at each call (as most
# providers do), waits 3 s after each tool message (the window for the
# kill) and logs every transfer it executes to a ledger the test reads;
# short heartbeats let the second take the turn over within seconds.
create_db "${db}_takeover"
takeover_db_url=$created_url
takeover_ledger="$tmp/takeover-ledger.jsonl"
HOLDPOINT_DEMO_FRESH_REFS=1 HOLDPOINT_DEMO_TOOL_DELAY=3s HOLDPOINT_DEMO_LEDGER="$takeover_ledger" \
	start_server server-takeover-a "$tmp/platform" "$takeover_db_url" --dev --heartbeat-interval 200ms --heartbeat-timeout 1s
takeover_a=$url
takeover_a_pid=$started_pid
# takeover.test.mjs kills it with SIGKILL, which is the point of the test:
# out of the shell's job table, its death is not reported as "Killed" in
# the log of a run that passed.
disown "$takeover_a_pid"
HOLDPOINT_DEMO_FRESH_REFS=1 HOLDPOINT_DEMO_TOOL_DELAY=3s HOLDPOINT_DEMO_LEDGER="$takeover_ledger" \
	start_server server-takeover-b "$tmp/platform" "$takeover_db_url" --dev --heartbeat-interval 200ms --heartbeat-timeout 1s
takeover_b=$url

cd "$here"
bash ./install.sh

echo "run.sh: running the client tests"
rc=0
# --test-timeout bounds each test and also each file (node runs a file as
# one test of its own), so it stops a hung test, not a slow machine: with
# 60 s, two full runs side by side failed two files whose tests all passed
# (one file's tests took 30 s on their own under that load).
HOLDPOINT_TAKEOVER_A_URL="$takeover_a" HOLDPOINT_TAKEOVER_A_PID="$takeover_a_pid" HOLDPOINT_TAKEOVER_B_URL="$takeover_b" HOLDPOINT_TAKEOVER_LEDGER="$takeover_ledger" \
	HOLDPOINT_HOSTILE_URL="$hostile_base" HOLDPOINT_HOSTILE_MODEL_URL="http://127.0.0.1:$hostile_port" HOLDPOINT_HOSTILE_RECEIVER_URL="$hostile_recv_base" \
	HOLDPOINT_URL="$base" HOLDPOINT_URL2="$base2" HOLDPOINT_STREAM_GATES="$tmp/gates" HOLDPOINT_RECEIVER_URL="$recv_base" HOLDPOINT_SEED_URL="$seed_base" HOLDPOINT_SHIPPING_URL="$shipping_base" HOLDPOINT_AUTH_URL="$auth_base" HOLDPOINT_CLIENT_KEY="$auth_key" HOLDPOINT_APPROVER_KEYS="$approver_keys" HOLDPOINT_STRANGER_KEY="$stranger_key" node --test --test-reporter=tap --test-timeout=600000 "$@" || rc=$?
exit "$rc"

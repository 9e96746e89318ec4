# Holdpoint development tasks. Each target that needs PostgreSQL gets it from
# scripts/pg-local.sh: DATABASE_URL if set, else the server on
# 127.0.0.1:5432, else a throwaway cluster it starts in .pgdata/.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
SQLC := $(GO) tool -modfile=tools/go.mod sqlc
STATICCHECK := $(GO) tool -modfile=tools/go.mod staticcheck
# The race detector needs cgo, which Go turns off where no C compiler is
# installed; the tests then run without it rather than not at all.
RACE := $(if $(filter 1,$(shell $(GO) env CGO_ENABLED)),-race,)

.PHONY: help run example test check generate build fuzz bench soak

# How long each fuzzer runs under `make fuzz`; `make check` runs each for
# FUZZTIME_CHECK inputs. The check counts inputs rather than seconds: when
# a time limit runs out while a worker is inside a slow input (a database
# stall on a loaded machine), Go reports the fuzzer as failed with "context
# deadline exceeded", and CI failed on that once.
FUZZTIME ?= 10m
FUZZTIME_CHECK ?= 50000x

help:
	@echo "make run       build bin/platform and serve the demo agents on HOLDPOINT_ADDR (127.0.0.1:8080), database HOLDPOINT_DB (holdpoint)"
	@echo "make test      run all tests (Go, then the JS client in tests/compat), ending with one line: N passed, N failed"
	@echo "make example NAME=banking   run one of examples/ like make run"
	@echo "make check     gofmt, go mod tidy, go vet, staticcheck, the layers test, sqlc generate/vet leaving no diff in db/, db/schema.sql matching the migrations, 50000 inputs per fuzzer"
	@echo "make generate  regenerate db/ from queries/ with sqlc, and db/schema.sql (the migrated schema) with pg_dump"
	@echo "make build     build bin/platform"
	@echo "make fuzz      run each fuzzer for FUZZTIME (default 10m), one after the other"
	@echo "make bench     measure the approval cycle (first beside the peers of PEERS, default ../shared/peers, alternated: ratios; then in-process, over HTTP, with webhooks, with the database a round trip away), the inbox at scale, idle sessions and event streams; writes bench-results.md"
	@echo "make soak      hold half the peak cycle rate for SOAK (default 10m), a line a minute; appends to bench-results.md"

# The server migrates its database at start-up but does not create it, so
# the database (HOLDPOINT_DB, default holdpoint) is created here on the
# server scripts/pg-local.sh finds (DATABASE_URL's if set). The binary is
# built once into bin/ and then run, so the address printed is printed
# when the server is about to listen, not before minutes of compiling.
# HOLDPOINT_ADDR (default 127.0.0.1:8080) is read by the server itself.
HOLDPOINT_DB ?= holdpoint
HOLDPOINT_ADDR ?= 127.0.0.1:8080
export HOLDPOINT_ADDR

run:
	@echo "building bin/platform (the first build takes a few minutes)" >&2; \
	$(GO) build -o bin/platform ./cmd/platform; \
	url=$$(scripts/pg-local.sh --db $(HOLDPOINT_DB)); \
	echo "Holdpoint (dev mode) on http://$(HOLDPOINT_ADDR), database $(HOLDPOINT_DB); the server logs \"serving\" with its address when it listens" >&2; \
	DATABASE_URL="$$url" exec bin/platform serve --dev

# make example NAME=banking runs examples/NAME like make run, on a database
# of its own (holdpoint_NAME).
example:
	@if [[ -z "$(NAME)" || ! -d examples/$(NAME) ]]; then echo "usage: make example NAME=banking (one of: $$(ls examples | grep -v internal | tr '\n' ' '))" >&2; exit 2; fi; \
	echo "building bin/example-$(NAME) (the first build takes a few minutes)" >&2; \
	$(GO) build -o bin/example-$(NAME) ./examples/$(NAME); \
	url=$$(scripts/pg-local.sh --db holdpoint_$(NAME)); \
	echo "examples/$(NAME) (dev mode) on http://$(HOLDPOINT_ADDR), database holdpoint_$(NAME)" >&2; \
	DATABASE_URL="$$url" exec bin/example-$(NAME) serve --dev

# DATABASE_URL is an admin URL here: every test creates its own database
# (internal/testdb), and the compat suite starts a server on one. Unless
# DATABASE_URL is set, the suite runs on a PostgreSQL cluster of its own
# (scripts/pg-local.sh test: .pgdata-test/ on 127.0.0.1:54328, fsync off,
# 300 connections), started here and stopped at the end when it was not
# already running: the machine's server keeps its max_connections and its
# disk flushes for its own work. The
# PostgreSQL binaries go on PATH because Debian keeps psql and friends off it
# when only the server package is installed.
#
# The JS client suite runs beside the Go tests (its log is printed after
# them), and the Go test binaries and each binary's parallel tests TEST_P
# at a time (go test's default is the number of cores): many tests spend
# their time waiting on servers, databases and browsers rather than on the
# two cores.
TEST_P ?= 4
# TEST_JSON=file keeps go test's -json output (each package's and test's
# start, end and elapsed time) in file.race and file.plain, for a look at
# where a run's time went.
TEST_JSON ?=
# The packages that take longest start first (go test runs them in the
# order given), so that they overlap the rest instead of running alone at
# the end.
TEST_FIRST ?= ./tests/cluster ./tests/ui ./tests/docs ./httpapi ./service ./examples/... ./cmd/platform/app
# The packages whose tests drive the code from outside (a browser, built
# programs, the benchmark harness, source checks) run without the race
# detector, beside the others, which run with it: the server code they
# drive runs under the race detector in the packages that test it
# (httpapi, service/..., and tests/cluster's race-built servers).
TEST_PLAIN ?= ./tests/ui ./tests/docs ./tests/layers ./tests/funclen ./examples/... ./internal/bench ./internal/testsummary
TEST_P_PLAIN ?= 2
# go test's own limit on each package's test binary (its default is 10m).
# tests/cluster builds the race-instrumented server in TestMain: on a
# fresh machine (an empty build cache) and with the other packages
# compiling beside it, that build alone took ten minutes.
TEST_TIMEOUT ?= 30m

# The tests (and the programs they build) compile with -trimpath: without
# it the build cache keys what it compiles for a test (each package with
# its _test files) by the checkout's directory, so a fresh clone compiled
# all of it again, with and without -race, before its tests could start.
test:
	@stop=; if [[ -z $${DATABASE_URL:-} ]] && ! (exec 3<>/dev/tcp/127.0.0.1/$${PG_TEST_PORT:-54328}) 2>/dev/null; then stop=1; fi; \
	url=$$(scripts/pg-local.sh test); export DATABASE_URL=$$url; \
	export GOFLAGS="-trimpath $${GOFLAGS:-}"; \
	bindir=$$(scripts/pg-local.sh bindir 2>/dev/null || true); \
	if [[ -n $$bindir ]]; then export PATH=$$bindir:$$PATH; fi; \
	counts=$$(mktemp -d); trap 'rm -rf "$$counts"; if [[ -n $$stop ]]; then scripts/pg-local.sh test-stop; fi' EXIT; \
	$(GO) build -o "$$counts/testsummary" ./internal/testsummary; \
	bash tests/compat/install.sh; bash tests/ui/install.sh; \
	bash tests/compat/run.sh >"$$counts/js.log" 2>&1 & js_pid=$$!; \
	all=$$($(GO) list $(TEST_FIRST) ./...); plain=$$($(GO) list $(TEST_PLAIN)); \
	racy=$$(grep -vxF -f <(echo "$$plain") <<<"$$all"); plain=$$(grep -xF -f <(echo "$$plain") <<<"$$all"); \
	{ $(GO) test $(RACE) -p $(TEST_P) -parallel $(TEST_P) -timeout $(TEST_TIMEOUT) -count=1 -json $$racy | tee $(if $(TEST_JSON),$(TEST_JSON).race,/dev/null) | "$$counts/testsummary" -slowest 10 -counts "$$counts/go-race" || true; } & race_pid=$$!; \
	$(GO) test -p $(TEST_P_PLAIN) -parallel $(TEST_P) -timeout $(TEST_TIMEOUT) -count=1 -json $$plain | tee $(if $(TEST_JSON),$(TEST_JSON).plain,/dev/null) | "$$counts/testsummary" -slowest 5 -counts "$$counts/go-plain" || true; \
	wait $$race_pid || true; \
	js_rc=0; wait $$js_pid || js_rc=$$?; \
	echo "--- the JS client suite (tests/compat/run.sh, run beside the Go tests) ---"; cat "$$counts/js.log"; \
	awk -v rc=$$js_rc '/^# (pass|fail|cancelled) /{n[$$2]=$$3} END{f=n["fail"]+n["cancelled"]; if (rc && !f) f=1; if ("pass" in n) print n["pass"], f}' "$$counts/js.log" >"$$counts/js"; \
	[[ -s $$counts/js ]] || rm -f "$$counts/js"; \
	"$$counts/testsummary" -total "$$counts/go-race" "$$counts/go-plain" "$$counts/js"

check:
	@unformatted=$$(find . \( -path ./.git -o -path ./db -o -path ./.pgdata -o -path ./.pgdata-test -o -path ./bin \
		-o -name node_modules \) -prune -o -name '*.go' -print | xargs -r gofmt -l); \
	if [[ -n $$unformatted ]]; then echo "not gofmt-ed:" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) -C tools mod tidy -diff
	$(GO) vet ./...
	$(GO) vet -tags bench ./cmd/platform/...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags bench ./cmd/platform/...
	$(GO) test -count=1 ./tests/layers
	$(SQLC) generate
	$(SQLC) vet
	@git diff --exit-code --stat -- db/ || { echo "db/ differs from sqlc generate: commit the regenerated code" >&2; exit 1; }
	scripts/schema-dump.sh --check
	@untracked=$$(git ls-files --others --exclude-standard -- db/); \
	if [[ -n $$untracked ]]; then echo "generated but not committed:" >&2; echo "$$untracked" >&2; exit 1; fi
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_CHECK)

# The service fuzzers run turns against a database of their own (the tools
# a turn runs are recorded). Each uses every core, hence one after the
# other. A crasher is saved under testdata/fuzz/ of its package; commit it
# as a regression test.
fuzz:
	@url=$$(scripts/pg-local.sh); export DATABASE_URL=$$url; \
	$(GO) test ./httpapi -run '^$$' -fuzz '^FuzzDecodeAgentRequest$$' -fuzztime $(FUZZTIME); \
	$(GO) test ./service -run '^$$' -fuzz '^FuzzValidateResume$$' -fuzztime $(FUZZTIME); \
	$(GO) test ./service -run '^$$' -fuzz '^FuzzStateSignature$$' -fuzztime $(FUZZTIME); \
	$(GO) test ./service -run '^$$' -fuzz '^FuzzMessageRoles$$' -fuzztime $(FUZZTIME); \
	$(GO) test ./service/agentdef -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)

# Each run creates a database of its own on the server and drops it after.
# BENCH_FLAGS adds flags to the approval-cycle runs (e.g. --cycles 100).
# Every run appends a row to a table of BENCH_RESULTS (gitignored), which
# make bench starts afresh and make soak appends to.
BENCH_RESULTS ?= bench-results.md
SOAK ?= 10m
SOAK_RATE ?= 0.5
# make bench first runs the approval cycle beside the peer runtimes of
# PEERS (a folder with the peers' scripts; see its README), prepared by
# scripts/peers.sh in the writable PEERS_DIR (npm install and the Genkit Go
# peer's build happen once). Without PEERS the platform runs alone there.
# PEERS_FLAGS goes to that step (--rounds 3, --peer-workloads 8x20,1x60,
# --peer-timeout 5m).
PEERS ?= ../shared/peers
PEERS_DIR ?= bin/.peers
PEERS_FLAGS ?=

bench:
	@url=$$(scripts/pg-local.sh); export DATABASE_URL=$$url; \
	$(GO) build -tags bench -o bin/platform-bench ./cmd/platform; \
	md="--markdown $(BENCH_RESULTS)"; rm -f $(BENCH_RESULTS); \
	GO="$(GO)" scripts/peers.sh "$(PEERS)" "$(PEERS_DIR)"; \
	bin/platform-bench bench --peers "$(PEERS_DIR)" $$md $(PEERS_FLAGS); \
	bin/platform-bench bench --mode inprocess --sessions 1 --cycles 200 --flat-cycles 200 --calibrate $$md $(BENCH_FLAGS); \
	bin/platform-bench bench --mode inprocess --sessions 8 --cycles 60 $$md $(BENCH_FLAGS) | tail -n 1; \
	bin/platform-bench bench --mode inprocess --sessions 32 --cycles 20 $$md $(BENCH_FLAGS) | tail -n 1; \
	bin/platform-bench bench --mode http --sessions 32 --cycles 20 $$md $(BENCH_FLAGS) | tail -n 1; \
	bin/platform-bench bench --mode inprocess --sessions 32 --cycles 20 --webhook $$md $(BENCH_FLAGS) | tail -n 2; \
	bin/platform-bench bench --mode inprocess --sessions 8 --cycles 100 --webhook --webhook-drain $$md $(BENCH_FLAGS) | tail -n 1; \
	bin/platform-bench bench --mode inprocess --sessions 1 --cycles 100 --db-rtt 500us $$md $(BENCH_FLAGS) | grep -v '^ *mode '; \
	bin/platform-bench bench --inbox $$md; \
	bin/platform-bench bench --idle-sessions 1000 $$md; \
	bin/platform-bench bench --streams 1000 $$md; \
	echo "results: $(abspath $(BENCH_RESULTS))"

soak:
	@url=$$(scripts/pg-local.sh); export DATABASE_URL=$$url; \
	$(GO) build -tags bench -o bin/platform-bench ./cmd/platform; \
	bin/platform-bench bench --soak $(SOAK) --soak-rate $(SOAK_RATE) --markdown $(BENCH_RESULTS); \
	echo "results: $(abspath $(BENCH_RESULTS))"

generate:
	$(SQLC) generate
	scripts/schema-dump.sh

build:
	$(GO) build -o bin/platform ./cmd/platform

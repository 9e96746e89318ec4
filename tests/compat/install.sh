#!/usr/bin/env bash
# Installs the compat suite's npm packages (the official Genkit JS client,
# and @genkit-ai/express for the reference server client/reference_test.go
# runs) from package-lock.json, when node_modules is missing or older than
# the lock file or the manifest. make test runs it before the Go tests;
# run.sh runs it too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# npm keeps a copy of the installed lock file in node_modules.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json || package.json -nt node_modules/.package-lock.json ]]; then
	echo "install.sh: installing the client (npm ci)" >&2
	npm ci --no-audit --no-fund --ignore-scripts >&2
fi

#!/usr/bin/env bash
# Installs axe-core, which the browser tests inject into every dashboard
# page (axe_test.go), from package-lock.json, when node_modules is missing
# or older than the lock file or the manifest. make test runs it before the
# Go tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# npm keeps a copy of the installed lock file in node_modules.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json || package.json -nt node_modules/.package-lock.json ]]; then
	echo "tests/ui/install.sh: installing axe-core (npm ci)" >&2
	npm ci --no-audit --no-fund --ignore-scripts >&2
fi

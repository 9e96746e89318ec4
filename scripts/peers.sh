#!/usr/bin/env bash
# Prepares the peer benchmarks (the approval cycle on other runtimes) for
# `platform bench --peers DEST`.
#
# Usage:
#   scripts/peers.sh PEERS_SRC DEST
#
# Copies the peers folder PEERS_SRC (often read-only) to the writable DEST
# (make bench: bin/.peers), runs `npm install --no-audit --no-fund` there
# when node_modules is missing or package.json/package-lock.json changed,
# and builds the Genkit Go peer once into DEST/genkitgo-peer (again when
# its sources change). Running it again does only what changed. When
# PEERS_SRC is absent it says so and exits 0, doing nothing.
#
# Environment: GO names the go command (default go).
set -euo pipefail

log() { echo "peers: $*" >&2; }
die() { log "$*"; exit 1; }

[[ $# -eq 2 ]] || die "usage: scripts/peers.sh PEERS_SRC DEST"
src=$1 dest=$2
GO=${GO:-go}

if [[ ! -d $src ]]; then
	log "peers folder $src absent; nothing to do"
	exit 0
fi
mkdir -p "$dest" || die "cannot create $dest"

# digest FILE... prints one hash of the files' contents (missing files count
# as empty), to tell whether an install or a build is stale.
digest() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

# Copy every entry but node_modules, replacing the old copy; the source may
# be read-only, so the copy is made writable (the next copy replaces it).
shopt -s dotglob nullglob
copied=0
for entry in "$src"/*; do
	name=$(basename "$entry")
	[[ $name == node_modules ]] && continue
	if [[ -e $dest/$name ]] && diff -rq "$entry" "$dest/$name" >/dev/null 2>&1; then
		continue
	fi
	rm -rf "${dest:?}/$name"
	cp -R "$entry" "$dest/$name" || die "cannot copy $entry to $dest"
	chmod -R u+w "$dest/$name"
	copied=$((copied + 1))
done
log "copied $copied changed entries of $src to $dest"

# npm install, when node_modules is missing or the manifest changed.
if [[ -f $dest/package.json ]]; then
	want=$(digest "$dest/package.json" "$dest/package-lock.json")
	stamp=$dest/node_modules/.peers-install
	if [[ -d $dest/node_modules && -f $stamp && $(cat "$stamp") == "$want" ]]; then
		log "node_modules up to date"
	else
		command -v npm >/dev/null || die "npm not found (the JS peers need Node.js and npm)"
		log "npm install --no-audit --no-fund in $dest"
		(cd "$dest" && npm install --no-audit --no-fund) >&2 || die "npm install failed in $dest"
		echo "$want" >"$stamp"
	fi
fi

# The Genkit Go peer, built once (again when its sources change). A
# go.work above DEST must not pull it into another module's workspace.
if [[ -d $dest/genkitgo ]]; then
	want=$(cd "$dest/genkitgo" && digest go.mod go.sum $(ls ./*.go))
	stamp=$dest/genkitgo-peer.stamp
	if [[ -x $dest/genkitgo-peer && -f $stamp && $(cat "$stamp") == "$want" ]]; then
		log "genkitgo-peer up to date"
	else
		log "building the Genkit Go peer into $dest/genkitgo-peer"
		(cd "$dest/genkitgo" && GOWORK=off "$GO" build -o ../genkitgo-peer .) >&2 || die "go build of $dest/genkitgo failed"
		echo "$want" >"$stamp"
	fi
fi
log "ready in $dest"

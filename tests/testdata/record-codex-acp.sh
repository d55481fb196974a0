#!/bin/sh
# Re-records testdata/codex-acp-0.16.0.txt, codex-acp's side of
# TestCodex_Parity: installs codex-acp from npm into a scratch directory
# (never into the repository) and runs the test with -codex-acp. Needs node
# and npm (and the Codex CLI the tests pin, which they install).
# Usage: tests/testdata/record-codex-acp.sh
set -eu
version=0.16.0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && npm init -y >/dev/null && npm install --no-audit --no-fund "@zed-industries/codex-acp@$version" >/dev/null)
bin=$(ls "$scratch"/node_modules/@zed-industries/codex-acp-*/bin/codex-acp | head -n 1)
cd "$(dirname "$0")/.."
go test -run '^TestCodex_Parity$' -count=1 . -args -codex-acp "$bin"

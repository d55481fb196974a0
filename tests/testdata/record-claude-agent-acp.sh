#!/bin/sh
# Re-records testdata/claude-agent-acp-0.23.1.txt, claude-agent-acp's side of
# TestClaude_Parity: installs the adapter from npm into a scratch directory
# (never into the repository) and runs the test with -claude-agent-acp.
# Needs node and npm. Usage: tests/testdata/record-claude-agent-acp.sh
set -eu
version=0.23.1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && npm init -y >/dev/null && npm install --no-audit --no-fund "@zed-industries/claude-agent-acp@$version" >/dev/null)
cd "$(dirname "$0")/.."
go test -run '^TestClaude_Parity$' -count=1 . -args -claude-agent-acp "$scratch/node_modules/@zed-industries/claude-agent-acp/dist/index.js"

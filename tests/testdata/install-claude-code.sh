#!/bin/sh
# Runs TestClaude_RealCLI against real Claude Code CLIs from npm: 2.0.77 and
# the newest 2.1.x the registry serves (or the versions given as
# arguments), installed into a scratch directory (never into the
# repository). The CLIs talk only to the test's loopback fake API.
# Needs npm (and node for the 2.0 CLI, a JavaScript file).
# Usage: tests/testdata/install-claude-code.sh [version...]
set -eu
if [ $# -eq 0 ]; then
	newest=$(npm view '@anthropic-ai/claude-code@2.1' version | tail -n 1 | sed "s/.* '\(.*\)'/\1/")
	set -- 2.0.77 "$newest"
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
clis=
for v in "$@"; do
	mkdir "$scratch/$v"
	(cd "$scratch/$v" && npm init -y >/dev/null && npm install --no-audit --no-fund "@anthropic-ai/claude-code@$v" >/dev/null)
	clis="$clis${clis:+,}$(readlink -f "$scratch/$v/node_modules/.bin/claude")"
	echo "Claude Code $v: $("$scratch/$v/node_modules/.bin/claude" --version)"
done
cd "$(dirname "$0")/.."
ACP_BRIDGE_CLAUDE_CLIS=$clis go test -run '^TestClaude_RealCLI$' -count=1 -v .

// Command acp-bridge lets an editor that speaks the Agent Client Protocol
// (ACP v1, newline-delimited JSON-RPC on stdio) use an agent that speaks
// another dialect, over a WebSocket or a child process's stdio. The editor
// spawns acp-bridge as its agent:
//
//	acp-bridge                                  # the configured default agent
//	acp-bridge --agent NAME                     # a configured agent
//	acp-bridge --url ws://127.0.0.1:8765/acp    # an ad-hoc WebSocket agent
//	acp-bridge --dialect acp-v0 -- gemini --experimental-acp
//
// Subcommands: version, config validate|show|init, doctor, dialects, demo, check,
// compare, trace view, replay, completion, man.
//
// The command layer is package internal/cli; the bridge is package bridge,
// the dialects are package translate and its subpackages.
package main

import (
	"os"

	"github.com/acp-bridge/acp-bridge/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args))
}

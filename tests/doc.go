// Package tests holds acp-bridge's end-to-end tests. They build the real
// binary once (TestMain), spawn it exactly as an editor does — stdin and
// stdout pipes, stderr captured — and drive it with an independent ACP client
// (coder/acp-go-sdk) or with raw lines, against the scripted agent in
// tests/fakeagent served over a WebSocket and as a child process. Every line
// the bridge writes to stdout is checked against the ACP JSON schema shipped
// in the acp-go-sdk module.
package tests

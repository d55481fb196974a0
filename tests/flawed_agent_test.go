package tests

import "github.com/acp-bridge/acp-bridge/tests/fakeagent/flawed"

// The flawed agent (tests/fakeagent/flawed) runs as FAKE_AGENT=flawed, its
// defects named in FLAWED_DEFECTS.
func init() { ChildAgents["flawed"] = flawed.RunStdio }

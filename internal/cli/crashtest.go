//go:build crashtest

package cli

import (
	"os"
	"strings"
)

// A binary built with -tags crashtest, and only such a binary, crashes on
// purpose when ACP_BRIDGE_CRASH_TEST=panic: a goroutine panics with the
// agent's secrets in the panic value, as a bug formatting a request with
// its headers would. tests/crash_test.go builds it to prove that the crash
// output is scrubbed. A build tag rather than a hidden flag or variable:
// the binaries users run cannot crash on request, whatever their
// environment holds.
func init() {
	crashTestHook = func(secrets []string) {
		if os.Getenv("ACP_BRIDGE_CRASH_TEST") != "panic" {
			return
		}
		go func() {
			panic("forced crash (crashtest build) while holding the agent's secrets [" + strings.Join(secrets, " | ") + "]")
		}()
	}
}

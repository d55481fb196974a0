//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReserveStdout checks that after reserveStdout only the returned file
// reaches fd 1, and that fmt.Print and os.Stdout writes land on stderr.
func TestReserveStdout(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ACP_BRIDGE_TEST_STRAY=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	if got, want := stdout.String(), `{"jsonrpc":"2.0","method":"x"}`+"\n"; got != want {
		t.Errorf("stdout = %q, want only the ACP line %q", got, want)
	}
	for _, want := range []string{"stray print\n", "stray write\n"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr = %q, want it to hold %q", stderr.String(), want)
		}
	}
}

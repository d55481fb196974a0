package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/clock"
	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// ChildAgents are the fake agents this test binary can become. When the
// environment variable FAKE_AGENT names one, TestMain runs it on stdio
// instead of the tests and exits with its status; the bridge is started as
// `acp-bridge -- <this binary>` with FAKE_AGENT in its environment, which
// the bridge passes on to its child. Tests for other dialects add their
// agents here from an init function.
var ChildAgents = map[string]func() int{
	"acp": fakeagent.RunStdio,
}

// BridgeBin is the path of the acp-bridge binary under test, built once by
// TestMain.
var BridgeBin string

func TestMain(m *testing.M) {
	if name := os.Getenv("FAKE_AGENT"); name != "" {
		run, ok := ChildAgents[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "tests: unknown FAKE_AGENT %q\n", name)
			os.Exit(2)
		}
		os.Exit(run())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	// ACP_BRIDGE_E2E_BINARY lets a developer point the suite at a binary
	// built by other means (a release build, a debugger build).
	if bin := os.Getenv("ACP_BRIDGE_E2E_BINARY"); bin != "" {
		BridgeBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "acp-bridge-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	BridgeBin = filepath.Join(dir, "acp-bridge")
	args := []string{"build", "-o", BridgeBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, calendarFlags()...)
	args = append(args, "github.com/acp-bridge/acp-bridge")
	cmd := exec.Command("go", args...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: go %v: %v\n", args, err)
		return 1
	}
	return m.Run()
}

// calendarFlags builds the bridge on this test binary's calendar: when the
// tests run with the clock moved ahead (see internal/clock), so does the
// bridge they start, and the dates they write mean the same to both.
func calendarFlags() []string {
	if clock.Ahead() == 0 {
		return nil
	}
	return []string{"-ldflags", "-X github.com/acp-bridge/acp-bridge/internal/clock.ahead=" + clock.Ahead().String()}
}

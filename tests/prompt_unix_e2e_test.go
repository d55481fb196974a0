//go:build unix

package tests

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Ctrl-C (SIGINT) in the middle of a turn sends session/cancel; prompt
// prints the rest of the turn and exits with status 130 once the agent has
// answered cancelled.
func TestPrompt_InterruptCancels(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(BridgeBin, "prompt", "wait-cancel", "--", selfExe(t))
	cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=acp"})
	cmd.Dir = t.TempDir()
	out := &lockedBuffer{}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "the first tick", func() bool { return strings.Contains(out.String(), "tick-0") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(WaitTimeout):
		_ = cmd.Process.Kill()
		t.Fatalf("prompt did not exit after Ctrl-C\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want status 130\nstderr:\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "cancel-seen") {
		t.Errorf("stdout lacks the agent's last words after the cancel:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "cancelling the turn") {
		t.Errorf("stderr does not say the turn is being cancelled:\n%s", errb.String())
	}
}

// A second Ctrl-C does not wait for the cancelled turn: acp-bridge ends at
// once, by the signal.
func TestPrompt_SecondInterruptQuits(t *testing.T) {
	t.Parallel()
	// The agent never answers, the cancel included; the bridge would wait
	// for it up to --cancel-grace.
	cmd := exec.Command(BridgeBin, "prompt", "--cancel-grace", "60s", "deaf", "--", selfExe(t))
	cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=acp"})
	cmd.Dir = t.TempDir()
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, "the turn to start", func() bool { return strings.Contains(out.String(), "deaf") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cancel", func() bool { return strings.Contains(errb.String(), "cancelling the turn") })
	// Run restores the default handling once the first signal is seen, on
	// a goroutine of its own: a second Ctrl-C that comes before that is
	// taken as the first was, so it is sent again until the process ends.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(WaitTimeout)
	for {
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("exit: %v, want the end by SIGINT", err)
			}
			ws, ok := ee.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
				t.Errorf("exit: %v, want the end by SIGINT\nstderr:\n%s", err, errb.String())
			}
			return
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("prompt did not exit after a second Ctrl-C\nstderr:\n%s", errb.String())
		case <-tick.C:
		}
	}
}

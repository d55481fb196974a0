package tests

// check and compare against agents that outlive their stdin's end: a
// wrapper script whose helper holds stdout and stderr open, one whose
// helper also ignores SIGTERM, and an agent that never answers while check
// is stopped by a signal. None may hang, and the wrapper's own cleanup
// must run (SIGTERM to the group before SIGKILL).

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wrapperScript writes a shell wrapper around the test binary's agent
// name: it starts a helper (recording its pid in dir/helper.pid) that
// outlives stdin's end and holds stdout and stderr, runs the agent in the
// foreground, then keeps running itself. On SIGTERM it cleans up (kills
// its helper, writes dir/cleaned). stubborn makes the helper ignore
// SIGTERM, as codex-acp's children do.
func wrapperScript(t *testing.T, dir string, stubborn bool) string {
	t.Helper()
	helper := "sleep 300 &"
	if stubborn {
		helper = "(trap '' TERM; exec sleep 300) &"
	}
	script := fmt.Sprintf(`#!/bin/sh
%s
echo $! >> %q/helper.pid
trap 'echo "wrapper: cleaning up" >&2; echo cleaned > %q/cleaned; exit 0' TERM
%q
sleep 300 & wait $!
`, helper, dir, dir, selfExe(t))
	path := filepath.Join(dir, "wrapper.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// helpersGone reports the helpers of dir/helper.pid still alive.
func helpersAlive(t *testing.T, dir string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "helper.pid"))
	if err != nil {
		t.Fatalf("the wrapper never started its helper: %v", err)
	}
	var alive []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		// A zombie is gone for this purpose: /proc says so.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			alive = append(alive, pid)
		}
	}
	return alive
}

func TestCheck_WrapperWhoseHelperOutlivesStdin(t *testing.T) {
	t.Parallel()
	for _, stubborn := range []bool{false, true} {
		t.Run(fmt.Sprintf("stubborn=%v", stubborn), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wrapper := wrapperScript(t, dir, stubborn)
			start := time.Now()
			// Two scenarios, three connections (initialize dials twice).
			rep, code, out := runCheck(t, []string{"FAKE_AGENT=flawed"}, "--only", "initialize,unknown-method", "--", wrapper)
			took := time.Since(start)
			if code != 0 || rep.status("initialize") != "PASS" || rep.status("unknown-method") != "PASS" {
				t.Fatalf("exit %d\n%s", code, out)
			}
			// Each connection's stop is bounded by stdin's wait, the
			// 2 s grace and the reap: well under 20 s for three even on
			// a loaded machine; a hang is forever.
			if took > 20*time.Second {
				t.Errorf("check took %v", took)
			}
			if _, err := os.Stat(filepath.Join(dir, "cleaned")); err != nil {
				t.Errorf("the wrapper's SIGTERM cleanup never ran: %v", err)
			}
			if alive := helpersAlive(t, dir); len(alive) > 0 {
				t.Errorf("helpers %v outlived check", alive)
			}
		})
	}
}

func TestCompare_WrapperWhoseHelperOutlivesStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wrapper := wrapperScript(t, dir, true)
	out, code := runCompare(t, []string{"FAKE_AGENT=flawed"}, "--exit-code", "--a", wrapper, "--b", selfExe(t), "--prompt", "hello")
	if code != 0 || !strings.Contains(out, "no differences") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if alive := helpersAlive(t, dir); len(alive) > 0 {
		t.Errorf("helpers %v outlived compare", alive)
	}
}

// TestCheck_SignalStopsTheRun stops check with SIGINT and SIGTERM while it
// waits on an agent that never answers (and whose wrapper's helper
// ignores SIGTERM): check exits promptly, prints what it found so far, and
// leaves nothing running.
func TestCheck_SignalStopsTheRun(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			wrapper := wrapperScript(t, dir, true)
			cmd := exec.Command(BridgeBin, "check", "--timeout", "60s", "--", wrapper)
			cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=mute"})
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait until the agent runs, then signal check.
			deadline := time.Now().Add(20 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(dir, "helper.pid")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the agent never started")
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond)
			sent := time.Now()
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("check still running 20 s after %v\nstdout:\n%s\nstderr:\n%s", sig, out.String(), errb.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit %v, want status 1", err)
			}
			if s := out.String(); !strings.Contains(s, "NOT RUN") || !strings.Contains(s, "interrupted") || !strings.Contains(s, "INTERRUPTED") {
				t.Errorf("no report of the interrupted run on stdout:\n%s\nstderr:\n%s", s, errb.String())
			}
			t.Logf("stopped %v after %v", sig, time.Since(sent))
			if alive := helpersAlive(t, dir); len(alive) > 0 {
				t.Errorf("helpers %v outlived check", alive)
			}
		})
	}
}

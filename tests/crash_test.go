//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A crash prints the panic's value and the goroutine stacks straight to
// fd 2, past every logger; the value can hold a secret. With secrets
// configured, fd 2 goes through a scrubbing filter process, so a forced
// panic whose message holds a header token and a URL query secret reaches
// stderr with both masked: the panic text and its stack are there, the
// canaries are not, stdout holds nothing but ACP, and the exit status is
// the panic's.
//
// The panic is forced by a binary built with -tags crashtest (see
// internal/cli/crashtest.go): no binary a user runs can crash on request.
func TestCrash_PanicOutputScrubbed(t *testing.T) {
	t.Parallel()
	const header, query = "canary-hdr-5b1e9d77", "canary-qry-0c4f2a86"
	bin := filepath.Join(t.TempDir(), "acp-bridge-crashtest")
	args := []string{"build", "-tags", "crashtest", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/acp-bridge/acp-bridge")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}

	cmd := exec.Command(bin, "--url", "ws://127.0.0.1:1/acp?token="+query, "--header", "Authorization=ACP_TEST_TOKEN")
	cmd.Env = hermeticEnv(t, []string{"ACP_TEST_TOKEN=Bearer " + header, "ACP_BRIDGE_CRASH_TEST=panic"})
	stdin, err := cmd.StdinPipe() // held open: the bridge serves until the panic
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ownGroup(cmd)
	// Wait returns once the bridge has exited and stdout and stderr are at
	// EOF: when the filter, which holds the real stderr, has finished.
	cmd.WaitDelay = 2 * WaitTimeout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(2 * WaitTimeout):
		killGroup(cmd)
		t.Fatalf("the crashing bridge did not end; stderr so far:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("exit: %v, want a non-zero status", err)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		t.Errorf("stderr still open %v after the bridge exited: the filter outlived it", cmd.WaitDelay)
	}
	out := stderr.String()
	for _, canary := range []string{header, query} {
		if strings.Contains(out, canary) {
			t.Errorf("the secret %s reached stderr:\n%s", canary, out)
		}
	}
	for _, want := range []string{
		"panic: forced crash (crashtest build) while holding the agent's secrets [",
		"<redacted>", "goroutine ", "crashtest.go",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	for _, line := range bytes.Split(bytes.TrimSuffix(stdout.Bytes(), []byte("\n")), []byte("\n")) {
		if len(line) > 0 && !json.Valid(line) {
			t.Errorf("stdout holds a line that is not ACP: %q", line)
		}
	}
}

// The filter passes each line on as it comes: the bridge's log reaches
// stderr while it serves, not when it exits.
func TestCrash_FilterDoesNotHoldLines(t *testing.T) {
	t.Parallel()
	const canary = "canary-live-88a1f0e3"
	b := StartBridge(t, []string{"--url", "ws://127.0.0.1:1/acp", "--header", "Authorization=ACP_TEST_TOKEN"},
		[]string{"ACP_TEST_TOKEN=Bearer " + canary}, nil)
	deadline := time.Now().Add(WaitTimeout)
	for !strings.Contains(b.Stderr(), "serving") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line on stderr %v after start; so far:\n%s", WaitTimeout, b.Stderr())
		}
		select {
		case <-b.Exited():
			t.Fatalf("the bridge exited; stderr:\n%s", b.Stderr())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && !hasFilterChild(b.Pid()) {
		t.Errorf("no stderr filter process runs for a bridge with secrets")
	}
	b.In.Close()
	if code, ok := b.WaitExit(WaitTimeout); !ok || code != 0 {
		t.Errorf("exit %d (exited: %v), want 0", code, ok)
	}
	if strings.Contains(b.Stderr(), canary) {
		t.Errorf("the secret reached stderr:\n%s", b.Stderr())
	}
	if !strings.Contains(b.Stderr(), "editor closed its input") {
		t.Errorf("stderr incomplete when the bridge had exited:\n%s", b.Stderr())
	}
}

// hasFilterChild reports whether a child of pid runs the stderr filter,
// from /proc.
func hasFilterChild(pid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after ')'.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
		if bytes.Contains(cmdline, []byte("__stderr-filter")) {
			return true
		}
	}
	return false
}

//go:build unix

package legacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// startChild starts the test binary as a fake agent in the given mode (see
// runChild), with edit applied to the Command first.
func startChild(t testing.TB, mode string, edit func(*legacy.Command)) (*legacy.Process, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	log, buf := testLogger(t)
	cmd := legacy.Command{Path: exe, Logger: log, Env: []string{
		childEnv + "=" + mode,
		// Under -race a binary otherwise sleeps 1 s at a zero exit to let
		// other threads report (ThreadSanitizer's atexit_sleep_ms).
		"GORACE=atexit_sleep_ms=0",
	}}
	if edit != nil {
		edit(&cmd)
	}
	p, err := cmd.Start(t.Context())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p, buf
}

func readJSON(t *testing.T, p *legacy.Process, v any) {
	t.Helper()
	b, err := readWithin(t, p, 10*time.Second)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
}

func expectFrame(t *testing.T, p *legacy.Process, want string) {
	t.Helper()
	got, err := readWithin(t, p, 10*time.Second)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if string(got) != want {
		t.Fatalf("Read = %s, want %s", got, want)
	}
}

// processGone reports whether pid has exited (a zombie counts: it runs no
// more, and its reaping belongs to whoever inherited it).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			return b[i+2] == 'Z' || b[i+2] == 'X'
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return true
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// killStray kills a grandchild a failed test may have left running.
func killStray(pid int) {
	if pid > 0 && !processGone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcessFramesRoundTrip(t *testing.T) {
	p, _ := startChild(t, "echo", nil)
	big := `{"big":"` + strings.Repeat("b", 1<<20) + `"}`
	frames := []string{`{"jsonrpc":"2.0","id":0,"method":"initialize"}`, big}
	for i := range 200 {
		frames = append(frames, fmt.Sprintf(`{"seq":%d}`, i))
	}
	errc := make(chan error, 1)
	go func() {
		for _, f := range frames {
			if err := p.Write(t.Context(), []byte(f)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for _, want := range frames {
		got, err := readWithin(t, p, 10*time.Second)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if string(got) != want {
			t.Fatalf("Read = %.80s, want %.80s", got, want)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n := p.Skipped(); n != 0 {
		t.Errorf("Skipped() = %d, want 0", n)
	}
}

func TestProcessSkipsBanner(t *testing.T) {
	p, logs := startChild(t, "banner", nil)
	if err := p.Write(t.Context(), []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize"}`)); err != nil {
		t.Fatal(err)
	}
	expectFrame(t, p, `{"jsonrpc":"2.0","id":0,"method":"initialize"}`)
	if n := p.Skipped(); n != 1 {
		t.Errorf("Skipped() = %d, want 1", n)
	}
	if l := logs.String(); !strings.Contains(l, "[WARN]") || !strings.Contains(l, "Data collection is disabled.") {
		t.Errorf("the skipped line was not logged as a warning:\n%s", l)
	}
}

func TestProcessSkipsOverlongAndScalarLines(t *testing.T) {
	p, logs := startChild(t, "overlong", func(c *legacy.Command) { c.MaxLine = 100 })
	expectFrame(t, p, `{"small":true}`) // after a 300-byte line
	if err := p.Write(t.Context(), []byte(`{"after":1}`)); err != nil {
		t.Fatal(err)
	}
	expectFrame(t, p, `{"after":1}`) // after the line "42"
	if n := p.Skipped(); n != 2 {
		t.Errorf("Skipped() = %d, want 2", n)
	}
	if l := logs.String(); !strings.Contains(l, "over-long line") {
		t.Errorf("the over-long line was not logged:\n%s", l)
	}
}

func TestProcessLogsStderr(t *testing.T) {
	p, logs := startChild(t, "stderr", nil)
	expectFrame(t, p, `{"ready":true}`)
	p.Close() // waits for the stderr reader to drain
	l := logs.String()
	for _, want := range []string{"[INFO]  TestProcessLogsStderr: hello from the agent's stderr", "second stderr line"} {
		if !strings.Contains(l, want) {
			t.Errorf("log lacks %q:\n%s", want, l)
		}
	}
}

// OnStderr sees every stderr line whole, as it is logged, for a caller
// that reports more of it than Read's error quotes.
func TestProcessOnStderr(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	p, _ := startChild(t, "stderr", func(c *legacy.Command) {
		c.OnStderr = func(line []byte) {
			mu.Lock()
			lines = append(lines, string(line))
			mu.Unlock()
		}
	})
	expectFrame(t, p, `{"ready":true}`)
	p.Close() // waits for the stderr reader to drain
	mu.Lock()
	defer mu.Unlock()
	want := []string{"hello from the agent's stderr", "second stderr line"}
	if !slices.Equal(lines, want) {
		t.Errorf("OnStderr saw %q, want %q", lines, want)
	}
}

// ProcessState is nil while the child runs and says how it ended once it
// has been reaped.
func TestProcessState(t *testing.T) {
	p, _ := startChild(t, "exit3", nil)
	expectFrame(t, p, `{"bye":true}`)
	if _, err := readWithin(t, p, 5*time.Second); err == nil {
		t.Fatal("Read succeeded after the exit")
	}
	ps := p.ProcessState() // Read's error came after the reaping
	if ps == nil || ps.ExitCode() != 3 {
		t.Fatalf("ProcessState() = %v, want exit status 3", ps)
	}

	running, _ := startChild(t, "echo", nil)
	if ps := running.ProcessState(); ps != nil {
		t.Errorf("ProcessState() of a running child = %v, want nil", ps)
	}
}

func TestProcessExitStatus(t *testing.T) {
	cases := []struct{ mode, want string }{
		{"exit3", "agent process exited with status 3"},
		{"selfkill", "agent process was killed by signal 9 (killed)"},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			p, _ := startChild(t, tc.mode, nil)
			expectFrame(t, p, `{"bye":true}`)
			for range 2 { // the error sticks
				_, err := readWithin(t, p, 5*time.Second)
				if err == nil || err.Error() != tc.want {
					t.Fatalf("Read error = %v, want %q", err, tc.want)
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Errorf("Read error does not wrap *exec.ExitError")
				}
			}
		})
	}
}

// The error for a child that died carries its last stderr lines, which
// usually say why: trimmed, blank ones dropped, at most five and 1 KiB.
func TestProcessExitErrorQuotesStderr(t *testing.T) {
	p, _ := startChild(t, "stderr-exit", nil)
	_, err := readWithin(t, p, 5*time.Second)
	if err == nil {
		t.Fatal("Read succeeded")
	}
	msg := err.Error()
	const head = "agent process exited with status 3: starting step "
	const tail = " | error: GEMINI_API_KEY not set"
	if !strings.HasPrefix(msg, head) || !strings.HasSuffix(msg, tail) {
		t.Fatalf("Read error = %q, want %q…%q", msg, head, tail)
	}
	if !strings.HasPrefix(msg, head+"5 | starting step 6 | starting step 7 | warning: www") {
		t.Errorf("Read error does not keep the last five lines: %q", msg)
	}
	if len(msg) > 600 {
		t.Errorf("Read error is %d bytes long; the over-long line should have been cut: %q", len(msg), msg)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Errorf("Read error does not wrap *exec.ExitError")
	}
}

// A grandchild holding stderr open delays the error only briefly.
func TestProcessExitWhileGrandchildHoldsStderr(t *testing.T) {
	p, _ := startChild(t, "stderr-grandchild", nil)
	var msg struct{ Grandchild int }
	readJSON(t, p, &msg)
	t.Cleanup(func() { killStray(msg.Grandchild) })
	start := time.Now()
	_, err := readWithin(t, p, 5*time.Second)
	if want := "agent process exited with status 4: fatal: config broken"; err == nil || err.Error() != want {
		t.Fatalf("Read error = %v, want %q", err, want)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Read took %v after the child exited", d)
	}
}

func TestProcessClosedStdout(t *testing.T) {
	p, _ := startChild(t, "closeout", nil)
	expectFrame(t, p, `{"ready":true}`)
	start := time.Now()
	_, err := readWithin(t, p, 5*time.Second)
	if want := "agent process closed its stdout"; err == nil || err.Error() != want {
		t.Fatalf("Read error = %v, want %q", err, want)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Read took %v after stdout closed", d)
	}
	if processGone(p.Pid()) {
		t.Errorf("the child exited; this test needs it running")
	}
}

func TestProcessExitWhileGrandchildHoldsStdout(t *testing.T) {
	p, _ := startChild(t, "grandchild-exit", nil)
	var msg struct{ Grandchild int }
	readJSON(t, p, &msg)
	t.Cleanup(func() { killStray(msg.Grandchild) })
	start := time.Now()
	_, err := readWithin(t, p, 5*time.Second)
	if want := "agent process exited with status 0"; err == nil || err.Error() != want {
		t.Fatalf("Read error = %v, want %q", err, want)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("Read took %v after the child exited", d)
	}
	if processGone(msg.Grandchild) {
		t.Fatalf("grandchild %d already gone; this test needs it running", msg.Grandchild)
	}
	p.Close()
	waitGone(t, msg.Grandchild, "grandchild")
}

func TestProcessCloseStages(t *testing.T) {
	cases := []struct {
		mode     string
		min, max time.Duration
	}{
		// Exits at stdin EOF: no signal needed, unless it takes longer
		// than stdinExitWait (250 ms) to exit, as a -race child on a
		// loaded machine once did (259 ms), when SIGTERM ends it at once.
		// Either way Close never waits for StopGrace (5 s).
		{"echo", 0, time.Second},
		// Ignores stdin EOF, dies of SIGTERM well before StopGrace.
		{"sleeper", 250 * time.Millisecond, 1500 * time.Millisecond},
		// Ignores SIGTERM: SIGKILLed after StopGrace.
		{"stubborn", 500 * time.Millisecond, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			grace := 5 * time.Second
			if tc.mode == "stubborn" {
				grace = 300 * time.Millisecond
			}
			p, logs := startChild(t, tc.mode, func(c *legacy.Command) { c.StopGrace = grace })
			if tc.mode != "echo" {
				expectFrame(t, p, `{"ready":true}`)
			}
			start := time.Now()
			if err := p.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			d := time.Since(start)
			if d < tc.min || d > tc.max {
				t.Errorf("Close took %v, want %v to %v", d, tc.min, tc.max)
			}
			// Reaped by Close, not merely dead: no zombie left behind.
			if err := syscall.Kill(p.Pid(), 0); err != syscall.ESRCH {
				t.Errorf("child %d after Close: kill(0) = %v, want ESRCH", p.Pid(), err)
			}
			killed := strings.Contains(logs.String(), "ignored SIGTERM; sending SIGKILL")
			if killed != (tc.mode == "stubborn") {
				t.Errorf("SIGKILL logged = %v for %s:\n%s", killed, tc.mode, logs)
			}
		})
	}
}

// CloseBy fits the stages to its deadline: a child that ignores SIGTERM,
// under the default grace (2 s) or a longer one configured, is killed and
// reaped by a deadline 1 s away.
func TestProcessCloseByDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		grace    time.Duration
		in       time.Duration // the deadline, from now
		min, max time.Duration
	}{
		{"default grace", 0, time.Second, 0, time.Second},
		{"configured grace", 10 * time.Second, time.Second, 0, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, logs := startChild(t, "stubborn", func(c *legacy.Command) { c.StopGrace = tc.grace })
			expectFrame(t, p, `{"ready":true}`)
			start := time.Now()
			p.CloseBy(start.Add(tc.in))
			d := time.Since(start)
			t.Logf("CloseBy(now+%v) returned after %v", tc.in, d.Round(time.Millisecond))
			if d < tc.min || d > tc.max {
				t.Errorf("CloseBy(now+%v) took %v, want %v to %v", tc.in, d, tc.min, tc.max)
			}
			if err := syscall.Kill(p.Pid(), 0); err != syscall.ESRCH {
				t.Errorf("child %d after CloseBy: kill(0) = %v, want ESRCH", p.Pid(), err)
			}
			if !strings.Contains(logs.String(), "ignored SIGTERM; sending SIGKILL") {
				t.Errorf("no SIGKILL logged:\n%s", logs)
			}
		})
	}
}

func TestProcessKillsGrandchild(t *testing.T) {
	for _, mode := range []string{"grandchild-wait", "grandchild-exit"} {
		t.Run(mode, func(t *testing.T) {
			p, _ := startChild(t, mode, nil)
			var msg struct{ Grandchild int }
			readJSON(t, p, &msg)
			if msg.Grandchild == 0 {
				t.Fatal("no grandchild pid")
			}
			t.Cleanup(func() { killStray(msg.Grandchild) })
			start := time.Now()
			p.Close()
			if d := time.Since(start); d > 2500*time.Millisecond {
				t.Errorf("Close took %v", d)
			}
			waitGone(t, msg.Grandchild, "grandchild")
		})
	}
}

func TestProcessCloseUnblocksRead(t *testing.T) {
	p, _ := startChild(t, "echo", nil)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Read(context.Background())
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, legacy.ErrClosed) {
			t.Errorf("pending Read returned %v, want ErrClosed", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Close did not unblock Read")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := p.Write(t.Context(), []byte(`{}`)); !errors.Is(err, legacy.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}

func TestProcessWriteHonoursContext(t *testing.T) {
	// The child never reads stdin, so the pipe fills and Write blocks.
	p, _ := startChild(t, "sleeper", nil)
	expectFrame(t, p, `{"ready":true}`)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	// Small writes with the same ctx first (the pipe takes them): the watch
	// on ctx, set up by the first, must still interrupt the blocked one.
	for range 3 {
		if err := p.Write(ctx, []byte(`{"small":true}`)); err != nil {
			t.Fatalf("a small Write: %v", err)
		}
	}
	start := time.Now()
	err := p.Write(ctx, bytes.Repeat([]byte("w"), 4<<20))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write = %v, want the ctx deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Write returned after %v", d)
	}
}

func TestProcessDirAndEnv(t *testing.T) {
	dir := t.TempDir()
	p, logs := startChild(t, "env", func(c *legacy.Command) {
		c.Dir = dir
		c.Env = append(c.Env, "LEGACY_TEST_X=hello-secret")
	})
	var got struct{ Dir, X string }
	readJSON(t, p, &got)
	wantDir, _ := filepath.EvalSymlinks(dir)
	gotDir, _ := filepath.EvalSymlinks(got.Dir)
	if gotDir != wantDir || got.X != "hello-secret" {
		t.Errorf("child saw dir %q and LEGACY_TEST_X %q, want %q and %q", got.Dir, got.X, wantDir, "hello-secret")
	}
	if strings.Contains(logs.String(), "hello-secret") {
		t.Errorf("the log shows an environment value:\n%s", logs)
	}
}

func TestProcessStartErrors(t *testing.T) {
	for path, want := range map[string]string{
		"/nonexistent/agent-binary": `agent command "/nonexistent/agent-binary" could not start: no such file or directory`,
		"no-such-agent-command":     `agent command "no-such-agent-command" could not start: executable file not found in $PATH`,
	} {
		_, err := legacy.Command{Path: path}.Start(t.Context())
		if err == nil || err.Error() != want {
			t.Errorf("Start error = %v, want %q", err, want)
		}
	}
	_, err := legacy.Command{Path: "/bin/sh", Dir: "/nonexistent/dir"}.Start(t.Context())
	if want := `agent command "/bin/sh" could not start: working directory /nonexistent/dir: no such file or directory`; err == nil || err.Error() != want {
		t.Errorf("Start error = %v, want %q", err, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	exe, _ := os.Executable()
	_, err = legacy.Command{Path: exe, Env: []string{childEnv + "=echo"}}.Start(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestProcessOnIdle(t *testing.T) {
	p, _ := startChild(t, "echo", nil)
	checkIdle(t, p)
}

// A child that closes its stdout but runs on makes Read wait for its exit
// (up to exitNoticeWait) once the last line is read: that wait is a wait
// like any other, which OnIdle's function must come before (a caller
// holding a lock until then would hold it for the whole wait).
func TestProcessOnIdleBeforeWaitingForTheExit(t *testing.T) {
	p, _ := startChild(t, "closeout", nil)
	idled := make(chan struct{}, 16)
	p.OnIdle(func() { idled <- struct{}{} })
	if got, err := readWithin(t, p, 5*time.Second); err != nil || string(got) != `{"ready":true}` {
		t.Fatalf("Read = %s, %v; want the child's ready line", got, err)
	}
	// Let the end of stdout reach the reader first, so that no wait for
	// output comes before the wait for the exit.
	time.Sleep(300 * time.Millisecond)
	for len(idled) > 0 {
		<-idled
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Read(t.Context())
		done <- err
	}()
	select {
	case <-idled:
	case err := <-done:
		t.Fatalf("Read returned %v without calling OnIdle's function before it waited for the child's exit", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Read waiting for the child's exit did not call OnIdle's function")
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed its stdout") {
		t.Fatalf("Read = %v, want that the agent closed its stdout", err)
	}
}

package nbio

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// AwaitExit returns once the child has exited, not before, and leaves it
// for Wait to reap; meanwhile its goroutine waits in the poller, not in a
// system call, so the P is free for others.
func TestAwaitExit(t *testing.T) {
	cmd := exec.Command("sleep", "0.3")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep(1) to run: %v", err)
	}
	start := time.Now()
	done := make(chan bool)
	go func() { done <- AwaitExit(cmd.Process.Pid) }()

	// While the child runs, the waiting goroutine is parked in the
	// poller ("IO wait"), not in a system call ("syscall").
	time.Sleep(100 * time.Millisecond)
	buf := make([]byte, 1<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, "nbio.AwaitExit") && !strings.Contains(g, "[IO wait") {
			t.Errorf("AwaitExit waits other than in the poller:\n%s", g)
		}
	}
	select {
	case <-done:
		t.Fatal("AwaitExit returned while the child was running")
	default:
	}

	if ok := <-done; !ok {
		t.Fatal("AwaitExit could not wait (no pidfd?)")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("AwaitExit returned after %v, before the child's 300 ms", d)
	}
	// Not reaped: Wait has the exit status to return.
	if err := cmd.Wait(); err != nil || !cmd.ProcessState.Exited() {
		t.Errorf("Wait after AwaitExit: %v, state %v", err, cmd.ProcessState)
	}
}

// A child that has already exited (a zombie until Wait) is seen at once.
func TestAwaitExit_AlreadyExited(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skipf("no true(1) to run: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	done := make(chan bool, 1)
	go func() { done <- AwaitExit(cmd.Process.Pid) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("AwaitExit could not wait")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AwaitExit still waits 5 s after its child exited")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("Wait after AwaitExit: %v", err)
	}
}

// A pid no process has is not waited for.
func TestAwaitExit_NoSuchProcess(t *testing.T) {
	if AwaitExit(1 << 30) {
		t.Error("AwaitExit waited for a pid no process has")
	}
}

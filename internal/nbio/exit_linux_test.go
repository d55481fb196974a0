package nbio

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// AwaitExit returns once the child has exited, not before, and leaves it
// for Wait to reap; meanwhile its goroutine waits in the poller, not in a
// system call, so the P is free for others.
func TestAwaitExit(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep(1) to run: %v", err)
	}
	defer cmd.Process.Kill()
	done := make(chan bool, 1)
	go func() { done <- AwaitExit(cmd.Process.Pid) }()

	// While the child runs, the waiting goroutine comes to be parked in
	// the poller ("IO wait"), not in a system call ("syscall"), where
	// Wait would park it. (Polled: a loaded machine takes a while.)
	buf := make([]byte, 1<<20)
	for deadline, parked := time.Now().Add(10*time.Second), false; !parked; time.Sleep(5 * time.Millisecond) {
		dump := string(buf[:runtime.Stack(buf, true)])
		var ours string
		for _, g := range strings.Split(dump, "\n\n") {
			if strings.Contains(g, "nbio.AwaitExit") {
				ours = g
			}
		}
		parked = strings.Contains(ours, "[IO wait")
		if !parked && time.Now().After(deadline) {
			t.Fatalf("AwaitExit's goroutine is not waiting in the poller after 10 s:\n%s", ours)
		}
	}
	select {
	case <-done:
		t.Fatal("AwaitExit returned while the child was running")
	default:
	}

	cmd.Process.Kill()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("AwaitExit could not wait (no pidfd?)")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitExit still waits 10 s after its child was killed")
	}
	// Not reaped: Wait has the exit status to return.
	if err := cmd.Wait(); err == nil || cmd.ProcessState == nil || cmd.ProcessState.Exited() {
		t.Errorf("Wait after AwaitExit: %v, state %v; want the kill's", err, cmd.ProcessState)
	}
}

// A child that has already exited (a zombie until Wait) is seen at once:
// a pidfd polls readable only as its process exits, and the poller's
// record of that can be cleared before AwaitExit waits. Twenty children,
// as the loss was a race (one run in three, with one child).
func TestAwaitExit_AlreadyExited(t *testing.T) {
	for range 20 {
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Skipf("no true(1) to run: %v", err)
		}
		for deadline := time.Now().Add(10 * time.Second); !zombie(cmd.Process.Pid); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("true(1) has not exited after 10 s")
			}
		}
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
}

// zombie reports whether process pid has exited and awaits its reaping.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// A pid no process has is not waited for.
func TestAwaitExit_NoSuchProcess(t *testing.T) {
	if AwaitExit(1 << 30) {
		t.Error("AwaitExit waited for a pid no process has")
	}
}

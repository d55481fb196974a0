package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal on this machine: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// Run by hand on a terminal, the bridge says in one line that an editor
// starts it and points to demo and doctor, then serves as usual (Ctrl-D
// ends it with status 0). From a pipe it says nothing of the kind.
func TestTerminalHint(t *testing.T) {
	const hint = "an editor starts acp-bridge as its agent; to try it by hand run 'acp-bridge demo', to check an agent 'acp-bridge doctor'"
	ptmx, pts := openPTY(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ACP_BRIDGE_TEST_ARGS=--url\nws://127.0.0.1:1/", "XDG_CONFIG_HOME="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	var stdout bytes.Buffer
	errFile, err := os.Create(t.TempDir() + "/stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	stderr := func() string { b, _ := os.ReadFile(errFile.Name()); return string(b) }
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, &stdout, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr(), "acp-bridge: waiting") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ptmx.Write([]byte{4}) // Ctrl-D: end of input
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("bridge on a terminal ended with %v after Ctrl-D, want status 0; stderr:\n%s", err, stderr())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("bridge on a terminal still running 10 s after Ctrl-D; stderr:\n%s", stderr())
	}
	if n := strings.Count(stderr(), hint); n != 1 {
		t.Errorf("stderr holds the hint %d times, want once:\n%s", n, stderr())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
	_, piped, _ := runSelf(t, nil, "--url", "ws://127.0.0.1:1/")
	if strings.Contains(piped, "an editor starts acp-bridge") {
		t.Errorf("from a pipe the bridge printed the terminal hint:\n%s", piped)
	}
}

// While doctor waits on an agent, a terminal shows what it waits for, for
// how long, and what the agent sent so far.
func TestDoctorProgress(t *testing.T) {
	ptmx, pts := openPTY(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TERM=xterm", "ACP_BRIDGE_TEST_ARGS="+strings.Join([]string{"doctor", "--request-timeout", "2s", "--", "sh", "-c", "echo hi; cat >/dev/null"}, "\n"),
		"XDG_CONFIG_HOME="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	var shown bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			shown.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	cmd.Wait()
	<-read // EIO once the last holder of the terminal has gone
	if want := "doctor: waiting for initialize, 1s; from the agent: 0 frame(s), 1 other line(s)"; !strings.Contains(shown.String(), want) {
		t.Errorf("the terminal did not show %q:\n%q", want, shown.String())
	}
}

// With no agent to serve, a person at a terminal is also pointed to demo
// and doctor, in the usage error.
func TestTerminalHintWithoutAgent(t *testing.T) {
	_, pts := openPTY(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "ACP_BRIDGE_TEST_ARGS=", "XDG_CONFIG_HOME="+t.TempDir(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, &stdout, &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("exit status %d (%v), want 2", code, err)
	}
	if want := "no agent to serve"; !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "'acp-bridge demo'") {
		t.Errorf("stderr lacks %q and the pointer to demo:\n%s", want, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

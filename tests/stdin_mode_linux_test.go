package tests

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The editor's stdin, a pipe, is polled (non-blocking, served by Go's
// poller), so that a read deadline can stop a read of an editor that went
// away, and so that the relay can run on one P (a read blocked in the
// kernel would hold it); the bridge says it serves on one P, unless
// GOMAXPROCS in the environment says otherwise. Checked on the built
// binary as an editor starts it.
func TestStdin_PolledOnOneP(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env   []string
		procs int
	}{
		{nil, 1},
		{[]string{"GOMAXPROCS=3"}, 3},
	} {
		t.Run(fmt.Sprint(c.procs), func(t *testing.T) {
			t.Parallel()
			tr := ChildTransport("acp")
			agent := tr.Start(t)
			b := StartBridge(t, agent.Args, append(agent.Env, c.env...), nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
			b.Next(10 * time.Second)
			if flags := fdFlags(t, b.Pid(), 0); flags&0o4000 == 0 { // O_NONBLOCK
				t.Errorf("stdin is a pipe but the bridge reads it blocking (flags %#o): no deadline can stop that read", flags)
			}
			if got := servingProcs(t, b.Stderr()); got != c.procs {
				t.Errorf("the bridge serves on %d Ps, want %d (env %q)", got, c.procs, c.env)
			}
		})
	}
}

// A stdin that cannot be polled (here a regular file; a terminal alike) is
// read by a thread blocked in the kernel, so the bridge keeps the
// runtime's default number of Ps rather than stall on one.
func TestStdin_NotPolledKeepsTheDefaultPs(t *testing.T) {
	t.Parallel()
	in, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(BridgeBin, "--", exe)
	cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=acp"})
	cmd.Stdin = in
	out, _ := cmd.CombinedOutput() // (stdin ends at once: the bridge stops)
	// The test binary's own default is the bridge's: same machine, same
	// cgroup, same environment.
	if got, want := servingProcs(t, string(out)), runtime.GOMAXPROCS(0); got != want {
		t.Errorf("with a regular file for stdin the bridge serves on %d Ps, want the runtime's default %d", got, want)
	}
}

// The one P is the stdio relay's alone: `serve`, one listener for many
// editors, keeps the runtime's default. It runs here with a pipe for stdin, as
// a supervisor may start it.
func TestStdin_ServeKeepsTheDefaultPs(t *testing.T) {
	t.Parallel()
	agent := ChildTransport("acp").Start(t)
	cmd := exec.Command(BridgeBin, append([]string{"serve", "--listen", "127.0.0.1:0"}, agent.Args...)...)
	cmd.Env = hermeticEnv(t, agent.Env)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	logged := make(chan string, 1)
	go func() {
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "listening: ") {
				logged <- sc.Text()
				io.Copy(io.Discard, stderr)
				return
			}
		}
		logged <- log.String()
	}()
	var line string
	select {
	case line = <-logged:
	case <-time.After(30 * time.Second):
		t.Fatal("acp-bridge serve did not log that it listens within 30 s")
	}
	m := regexp.MustCompile(`listening: .*procs=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no procs in serve's listening line:\n%s", line)
	}
	if got, want := m[1], strconv.Itoa(runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("serve, stdin a pipe, listens on %s Ps, want the runtime's default %s", got, want)
	}
}

// fdFlags returns the open flags of process pid's descriptor fd.
func fdFlags(t *testing.T, pid, fd int) uint64 {
	t.Helper()
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		t.Fatalf("reading the bridge's descriptor flags: %v", err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatalf("fdinfo flags %q: %v", v, err)
			}
			return flags
		}
	}
	t.Fatalf("no flags in fdinfo: %s", info)
	return 0
}

var procsLogged = regexp.MustCompile(`serving: .*procs=(\d+)`)

// servingProcs returns the procs the bridge's "serving" log line gives.
func servingProcs(t *testing.T, log string) int {
	t.Helper()
	m := procsLogged.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no procs in the bridge's serving line:\n%s", tail(log, 4<<10))
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

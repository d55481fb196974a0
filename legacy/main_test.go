package legacy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// childEnv names the environment variable that makes the test binary act as
// a fake agent (see runChild) instead of running the tests.
const childEnv = "LEGACY_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		runChild(mode)
		os.Exit(0)
	}
	before := runtime.NumGoroutine()
	code := m.Run()
	// The fuzzing engine keeps a signal goroutine of its own running.
	if fuzz := flag.Lookup("test.fuzz"); code == 0 && (fuzz == nil || fuzz.Value.String() == "") {
		code = checkGoroutines(before)
	}
	os.Exit(code)
}

// checkGoroutines fails the run when goroutines started by the tests are
// still running after a short settling time, and dumps every stack.
func checkGoroutines(before int) int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return 0
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "goroutine leak: %d goroutines before the tests, %d after\n%s\n", before, n, buf)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runChild is the fake agent. Each mode is a behaviour a test needs.
func runChild(mode string) {
	out := os.Stdout
	say := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
	}
	echo := func() {
		r := bufio.NewReader(os.Stdin)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				out.Write(line)
			}
			if err != nil {
				return
			}
		}
	}
	switch mode {
	case "echo":
		echo()
	case "pipesize":
		say(map[string]int{"stdoutPipe": stdoutPipeSize()})
	case "noisy":
		// A frame, two log lines, a frame, then a log loop that never ends.
		say(map[string]int{"seq": 1})
		out.WriteString("log: starting\nlog: ready\n")
		say(map[string]int{"seq": 2})
		for i := 0; ; i++ {
			fmt.Fprintf(out, "log: tick %d\n", i)
			time.Sleep(time.Millisecond)
		}
	case "banner":
		// Gemini CLI 0.1.x prints this before its first reply
		// (docs/agent-protocols.md#acp-v0-framing).
		fmt.Fprintln(out, "Data collection is disabled.")
		echo()
	case "script":
		// Does what each stdin line says: "line:X" writes X and a
		// newline, "half:X" (and "rest:X") writes X alone or with one,
		// "exit:N" exits with status N, "closeout" closes stdout and
		// waits, "hold" leaves a grandchild holding stdout and exits.
		r := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
			switch cmd {
			case "line", "rest":
				out.WriteString(arg + "\n")
			case "half":
				out.WriteString(arg)
			case "exit":
				n, _ := strconv.Atoi(arg)
				os.Exit(n)
			case "closeout":
				os.Stdout.Close()
				time.Sleep(time.Hour)
			case "hold":
				cmd := exec.Command("sleep", "60")
				cmd.Stdout = os.Stdout
				if err := cmd.Start(); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				os.Exit(0)
			}
		}
	case "overlong":
		say(map[string]string{"pad": strings.Repeat("x", 300)})
		say(map[string]bool{"small": true})
		fmt.Fprintln(out, "42")
		echo()
	case "stderr":
		fmt.Fprintln(os.Stderr, "hello from the agent's stderr")
		fmt.Fprintln(os.Stderr, "second stderr line")
		say(map[string]bool{"ready": true})
		echo()
	case "env":
		wd, _ := os.Getwd()
		say(map[string]string{"dir": wd, "x": os.Getenv("LEGACY_TEST_X")})
		echo()
	case "exit3":
		say(map[string]bool{"bye": true})
		os.Exit(3)
	case "stderr-exit":
		// Says why it gives up, at length, then exits: the last lines,
		// trimmed and bounded, explain the exit.
		for i := range 8 {
			fmt.Fprintf(os.Stderr, "  starting step %d\n", i)
		}
		fmt.Fprintln(os.Stderr, "")
		fmt.Fprintln(os.Stderr, "warning: "+strings.Repeat("w", 2000))
		fmt.Fprintln(os.Stderr, "\terror: GEMINI_API_KEY not set  ")
		os.Exit(3)
	case "stderr-grandchild":
		// Leaves a grandchild holding stderr (not stdout) open, and exits.
		fmt.Fprintln(os.Stderr, "fatal: config broken")
		cmd := exec.Command("sleep", "60")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		say(map[string]int{"grandchild": cmd.Process.Pid})
		os.Exit(4)
	case "flood":
		// Writes 200-byte lines as fast as the pipe takes them.
		line := `{"jsonrpc":"2.0","method":"session/update","params":{"text":"` + strings.Repeat("x", 200-61-5) + `"}}` + "\n"
		block := []byte(strings.Repeat(line, 512))
		for {
			if _, err := out.Write(block); err != nil {
				return
			}
		}
	case "selfkill":
		say(map[string]bool{"bye": true})
		p, _ := os.FindProcess(os.Getpid())
		p.Kill()
		time.Sleep(time.Hour)
	case "closeout":
		say(map[string]bool{"ready": true})
		os.Stdout.Close()
		time.Sleep(time.Hour)
	case "stubborn":
		// Ignores stdin EOF and SIGTERM: only SIGKILL ends it.
		signal.Ignore(syscall.SIGTERM)
		say(map[string]bool{"ready": true})
		time.Sleep(time.Hour)
	case "sleeper":
		// Ignores stdin EOF; dies of SIGTERM.
		say(map[string]bool{"ready": true})
		time.Sleep(time.Hour)
	case "grandchild-exit", "grandchild-wait":
		// Starts a grandchild in the same process group that holds stdout
		// open, then exits at once or waits for a signal.
		cmd := exec.Command("sleep", "60")
		cmd.Stdout = os.Stdout
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		say(map[string]int{"grandchild": cmd.Process.Pid})
		if mode == "grandchild-exit" {
			return
		}
		time.Sleep(time.Hour)
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		os.Exit(2)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger writing in one goroutine
// and a test reading in another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testLogger returns a logger that writes to a buffer the test can inspect
// and, with -v, to the test log.
func testLogger(t testing.TB) (hclog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	l := hclog.New(&hclog.LoggerOptions{
		Name:   t.Name(),
		Level:  hclog.Trace,
		Output: buf,
	})
	t.Cleanup(func() {
		if s := buf.String(); s != "" && (t.Failed() || testing.Verbose()) {
			t.Logf("log:\n%s", s)
		}
	})
	return l, buf
}

package tests

// The harness for `acp-bridge serve` (the ACP remote transport): starting
// it, reading its endpoint from its log, and running the TypeScript SDK's
// own remote clients against it with every message they receive checked
// against the ACP schema.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Served is one running `acp-bridge serve`.
type Served struct {
	t        *testing.T
	cmd      *exec.Cmd
	stderr   lockedBuffer
	exited   chan struct{}
	state    chan int
	Endpoint string // http://HOST:PORT/PATH, from its "listening" log line
}

var endpointRE = regexp.MustCompile(`listening: endpoint=(\S+)`)

// StartServe runs `acp-bridge serve --listen 127.0.0.1:0 ARGS...` with env
// added, and waits for its endpoint. Cleanup stops it with SIGTERM and
// requires a clean exit within 20 s and no data race in its log.
func StartServe(t *testing.T, args, env []string) *Served {
	t.Helper()
	s := &Served{t: t, exited: make(chan struct{}), state: make(chan int, 1)}
	full := append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	s.cmd = exec.Command(BridgeBin, full...)
	s.cmd.Env = hermeticEnv(t, env)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errR, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.stderr.Write([]byte(line + "\n"))
			if m := endpointRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		code := -1
		if err := s.cmd.Wait(); err == nil {
			code = 0
		} else if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		s.state <- code
		close(s.exited)
	}()
	select {
	case s.Endpoint = <-found:
	case <-s.exited:
		t.Fatalf("acp-bridge serve exited before listening:\n%s", s.stderr.String())
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("acp-bridge serve did not log its endpoint within 30 s:\n%s", s.stderr.String())
	}
	t.Cleanup(func() {
		code, ok := s.Stop(20 * time.Second)
		if !ok {
			t.Errorf("acp-bridge serve still running 20 s after SIGTERM; killed")
		} else if code != 0 {
			t.Errorf("acp-bridge serve exited with status %d after SIGTERM", code)
		}
		if strings.Contains(s.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector reported a data race in acp-bridge serve (see its log)")
		}
		if t.Failed() {
			t.Logf("acp-bridge serve stderr:\n%s", tail(s.stderr.String(), 64<<10))
		}
	})
	return s
}

// Stop sends SIGTERM and waits up to d for the exit status.
func (s *Served) Stop(d time.Duration) (code int, ok bool) {
	select {
	case <-s.exited:
		return s.exitCode(), true
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exitCode(), true
	case <-time.After(d):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		return -1, false
	}
}

func (s *Served) exitCode() int {
	select {
	case c := <-s.state:
		s.state <- c
		return c
	default:
		return -1
	}
}

// Stderr is its log so far.
func (s *Served) Stderr() string { return s.stderr.String() }

// WSURL is the endpoint as a ws:// URL.
func (s *Served) WSURL() string { return "ws" + strings.TrimPrefix(s.Endpoint, "http") }

// sdkRun is what client.mjs reports.
type sdkRun struct {
	Agent    string `json:"agent"`
	Sessions []struct {
		SessionID string   `json:"sessionId"`
		Stops     []string `json:"stops"`
		Texts     []string `json:"texts"`
	} `json:"sessions"`
}

// runSDKClient runs testdata/remote/client.mjs (the SDK's http-client or
// ws-client) against url with n sessions, checks every message it received
// against the ACP schema and returns its report.
func runSDKClient(t *testing.T, transport, url string, n int, env ...string) sdkRun {
	t.Helper()
	argv := NodeScript(t, "testdata/remote/client.mjs")
	args := []string{"--experimental-websocket", argv[1], transport, url, itoa(n)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*sdkWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], args...)
	cmd.Env = hermeticEnv(t, env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("SDK %s client: %v\nstderr:\n%s\nstdout:\n%s", transport, err, stderr.String(), tail(string(out), 16<<10))
	}
	in := &EditorInput{w: nopWriteCloser{}, sent: map[string][]string{}}
	v := newValidator(in)
	var run sdkRun
	got, received := false, 0
	for i, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		dir, msg, _ := strings.Cut(line, " ")
		switch dir {
		case ">":
			in.Write([]byte(msg + "\n"))
		case "<":
			received++
			for _, p := range v.check([]byte(msg + "\n")) {
				t.Errorf("SDK %s client, message %d: %s\n\tmessage: %s", transport, i, p, truncate(msg, 600))
			}
		case "RESULT":
			if err := json.Unmarshal([]byte(msg), &run); err != nil {
				t.Fatalf("client result: %v: %s", err, msg)
			}
			got = true
		}
	}
	t.Logf("SDK %s client: %d messages received, each valid ACP", transport, received)
	if !got {
		t.Fatalf("SDK %s client printed no result:\n%s\nstderr:\n%s", transport, tail(string(out), 16<<10), stderr.String())
	}
	return run
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
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
	killed   bool   // Kill9 ended it: no clean exit to require
}

var endpointRE = regexp.MustCompile(`listening: endpoint=(\S+)`)

// StartServe runs `acp-bridge serve --listen 127.0.0.1:0 ARGS...` with env
// added, and waits for its endpoint. Cleanup stops it with SIGTERM and
// requires a clean exit within 20 s and no data race in its log.
func StartServe(t *testing.T, args, env []string) *Served {
	t.Helper()
	return StartServeAt(t, "127.0.0.1:0", args, env)
}

// StartServeAt is StartServe listening at addr (an earlier one's, to
// restart it).
func StartServeAt(t *testing.T, addr string, args, env []string) *Served {
	t.Helper()
	return StartServeArgs(t, append([]string{"--listen", addr}, args...), env)
}

// StartServeArgs is StartServe with no --listen of its own: `acp-bridge
// serve ARGS...` (a configuration's serve block may say where to listen).
func StartServeArgs(t *testing.T, args, env []string) *Served {
	t.Helper()
	s := &Served{t: t, exited: make(chan struct{}), state: make(chan int, 1)}
	full := append([]string{"serve"}, args...)
	s.cmd = exec.Command(BridgeBin, full...)
	s.cmd.Env = hermeticEnv(t, env)
	ownGroup(s.cmd)
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
		killGroup(s.cmd)
		t.Fatalf("acp-bridge serve did not log its endpoint within 30 s:\n%s", s.stderr.String())
	}
	t.Cleanup(func() {
		code, ok := s.Stop(20 * time.Second)
		if s.killed {
			// Ended by the test with SIGKILL.
		} else if !ok {
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
		killGroup(s.cmd)
		<-s.exited
		return -1, false
	}
}

// Kill9 sends SIGKILL to serve alone (not its group) and waits for it to
// end.
func (s *Served) Kill9() {
	s.killed = true
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
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

// Addr is the HOST:PORT it listens on.
func (s *Served) Addr() string {
	hostport, _, _ := strings.Cut(strings.TrimPrefix(s.Endpoint, "http://"), "/")
	return hostport
}

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
	argv := NodeScriptWithWS(t, "testdata/remote/client.mjs")
	args := []string{argv[1], transport, url, strconv.Itoa(n)}
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

// WSPackage is the npm package the SDK's node WebSocket server adapter
// needs (experimental/node's createNodeWebSocketUpgradeHandler takes a
// `ws` WebSocketServer), pinned.
const WSPackage, WSVersion = "ws", "8.18.3"

var wsInstall struct {
	once sync.Once
	dir  string
	err  error
}

// NodeScriptWithWS is NodeScript with the `ws` package resolvable next to
// the SDK: it is installed once per machine, like the SDK, into its own
// directory beside it, and the script's node_modules links both.
func NodeScriptWithWS(t testing.TB, src string) []string {
	t.Helper()
	node, sdk := NodeSDK(t)
	wsInstall.once.Do(func() {
		dir := filepath.Join(filepath.Dir(sdkDir()), WSPackage+"-"+WSVersion)
		if _, err := os.Stat(filepath.Join(dir, "node_modules", WSPackage, "package.json")); err == nil {
			wsInstall.dir = dir
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			wsInstall.err = fmt.Errorf("npm is not on PATH: %w", err)
			return
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
		if err != nil {
			wsInstall.err = err
			return
		}
		defer os.RemoveAll(tmp)
		out, err := exec.Command(npm, "install", "--no-audit", "--no-fund", "--prefix", tmp, WSPackage+"@"+WSVersion).CombinedOutput()
		if err != nil {
			wsInstall.err = fmt.Errorf("npm install %s@%s: %v\n%s", WSPackage, WSVersion, err, out)
			return
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, serr := os.Stat(filepath.Join(dir, "node_modules", WSPackage)); serr != nil {
				wsInstall.err = err
				return
			}
		}
		wsInstall.dir = dir
	})
	if wsInstall.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(wsInstall.err)
		}
		t.Skipf("%v\nInstall it with: npm install --prefix %s %s@%s", wsInstall.err,
			filepath.Join(filepath.Dir(sdkDir()), WSPackage+"-"+WSVersion), WSPackage, WSVersion)
	}
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	script := filepath.Join(run, filepath.Base(src))
	if err := os.WriteFile(script, code, 0o600); err != nil {
		t.Fatal(err)
	}
	mods := filepath.Join(run, "node_modules")
	if err := os.Mkdir(mods, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{filepath.Join(sdk, "node_modules"), filepath.Join(wsInstall.dir, "node_modules")} {
		entries, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			_ = os.Symlink(filepath.Join(from, e.Name()), filepath.Join(mods, e.Name()))
		}
	}
	return []string{node, script}
}

// StartSDKServer runs testdata/remote/server.mjs, the SDK's AcpServer in
// front of an SDK-built agent, and returns its http:// endpoint. It stops
// when the test ends.
func StartSDKServer(t *testing.T) string {
	t.Helper()
	argv := NodeScriptWithWS(t, "testdata/remote/server.mjs")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = hermeticEnv(t, nil)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("SDK server stderr:\n%s", tail(stderr.String(), 16<<10))
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				found <- u
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(sdkWait):
		t.Fatalf("the SDK server did not listen within %s:\n%s", sdkWait, stderr.String())
		return ""
	}
}

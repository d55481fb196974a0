package tests

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// recordedInit is a trace of one agent link: the bridge's initialize and
// the agent's answer 300 ms later, with a secret-looking recorded prompt
// after it that a peer must never be shown.
const recordedInit = `{"t_ns":0,"hop":"agent","dir":"out","link":1,"kind":"request","method":"initialize","id":0,"msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}}
{"t_ns":300000000,"hop":"agent","dir":"in","link":1,"kind":"response","id":0,"msg":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}}
{"t_ns":400000000,"hop":"agent","dir":"out","link":1,"kind":"request","method":"session/new","id":1,"msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/private/recorded-cwd","mcpServers":[{"name":"recorded-mcp-secret","command":"x","args":[],"env":[]}]}}}
`

// replayMarkers are the stderr lines the tests wait for; the replay's
// stderr can run to many megabytes (a line per mismatch), so it is
// watched for these rather than kept.
var replayMarkers = []string{"evil.example", "recorded-mcp-secret", "does not read its replies"}

// startReplayListen runs `replay TRACE --listen` with extra flags and
// returns its ws:// URL, a func telling whether a replayMarkers line was
// seen on its stderr, and its pid.
func startReplayListen(t *testing.T, path string, extra ...string) (string, func(string) bool, int) {
	t.Helper()
	cmd := exec.Command(BridgeBin, append([]string{"replay", path, "--listen", "127.0.0.1:0"}, extra...)...)
	cmd.Env = hermeticEnv(t, nil)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	var url string
	for lines.Scan() {
		if _, u, ok := strings.Cut(lines.Text(), "serving on "); ok {
			url = u
			break
		}
	}
	if url == "" {
		t.Fatal("replay --listen did not say where it serves")
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	go func() {
		for lines.Scan() {
			for _, m := range replayMarkers {
				if strings.Contains(lines.Text(), m) {
					mu.Lock()
					seen[m] = true
					mu.Unlock()
				}
			}
		}
	}()
	saw := func(m string) bool { mu.Lock(); defer mu.Unlock(); return seen[m] }
	return url + "/acp", saw, cmd.Process.Pid
}

func writeRecording(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rec.trace")
	if err := os.WriteFile(path, []byte(recordedInit), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replay --listen is a local server a web page could reach through the
// user's browser: a foreign Origin is refused (and said so on stderr),
// loopback origins and clients without one are served, and --allow-origin
// lets one more in.
func TestReplay_ListenChecksOrigin(t *testing.T) {
	t.Parallel()
	path := writeRecording(t)
	url, saw, _ := startReplayListen(t, path)
	dial := func(url, origin string) (int, error) {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, resp, err := websocket.DefaultDialer.Dial(url, h)
		if c != nil {
			c.Close()
		}
		if resp != nil {
			return resp.StatusCode, err
		}
		return 0, err
	}
	if code, err := dial(url, "https://evil.example"); err == nil || code != http.StatusForbidden {
		t.Errorf("foreign origin: status %d, %v; want 403", code, err)
	}
	waitUntil(t, WaitTimeout, "the refusal logged", func() bool { return saw("evil.example") })
	for _, origin := range []string{"", "http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]"} {
		if _, err := dial(url, origin); err != nil {
			t.Errorf("origin %q refused: %v", origin, err)
		}
	}
	url2, _, _ := startReplayListen(t, path, "--allow-origin", "https://ok.example")
	if _, err := dial(url2, "https://ok.example"); err != nil {
		t.Errorf("--allow-origin https://ok.example refused it: %v", err)
	}
	if code, err := dial(url2, "https://evil.example"); err == nil || code != http.StatusForbidden {
		t.Errorf("foreign origin with another allowed: status %d, %v; want 403", code, err)
	}
}

// A frame that does not match is answered with an error naming the frame
// only: the recorded frame goes to stderr, so a client cannot walk the
// recording (prompts, paths, servers) by sending wrong frames.
func TestReplay_MismatchKeepsRecordingPrivate(t *testing.T) {
	t.Parallel()
	url, saw, _ := startReplayListen(t, writeRecording(t))
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(WaitTimeout))
	send := func(s string) string {
		if err := c.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := send(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}`); !strings.Contains(got, `"result"`) {
		t.Fatalf("the recorded initialize was answered %s", got)
	}
	got := send(`{"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":"/guess","mcpServers":[]}}`)
	if !strings.Contains(got, `"error"`) || !strings.Contains(got, "frame 2") {
		t.Errorf("a mismatch was answered %s, want an error naming frame 2", got)
	}
	for _, recorded := range []string{"recorded-cwd", "recorded-mcp-secret", `"expected"`} {
		if strings.Contains(got, recorded) {
			t.Errorf("the mismatch answer shows the recording (%q): %s", recorded, got)
		}
	}
	waitUntil(t, WaitTimeout, "the difference on stderr", func() bool { return saw("recorded-mcp-secret") })
}

// A client that sends and never reads is disconnected, with a line saying
// so, and the replay's memory stays flat.
func TestReplay_ListenClientNeverReads(t *testing.T) {
	t.Parallel()
	url, saw, pid := startReplayListen(t, writeRecording(t))
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := []byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`)
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			break // disconnected
		}
		if n%1024 == 0 && saw("does not read its replies") {
			break
		}
	}
	waitUntil(t, WaitTimeout, "the disconnect logged", func() bool { return saw("does not read its replies") })
	if rss := rssKiB(t, pid); rss > 200<<10 {
		t.Errorf("replay RSS %d KiB after a client that never reads", rss)
	}
}

// rssKiB is the resident memory of process pid.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// replay --stdio owes a reply as soon as its frame came: when the input
// ends before the recorded pause is over, the reply is still written.
func TestReplay_StdioFlushesAtEnd(t *testing.T) {
	t.Parallel()
	path := writeRecording(t)
	for i := range 5 {
		cmd := exec.Command(BridgeBin, "replay", path, "--stdio")
		cmd.Env = hermeticEnv(t, nil)
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":42,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, io.Discard
		_ = cmd.Run() // exit 1: the recording was not played to its end
		if !strings.Contains(out.String(), `"id":42,"result"`) {
			t.Fatalf("run %d: replay printed %q, want the initialize answer", i, out.String())
		}
	}
}

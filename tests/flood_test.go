//go:build linux

package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func init() { ChildAgents["flood"] = runFloodAgent }

// floodUpdate is the update the flooding agents write, line end included.
const floodUpdate = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"f","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}}}` + "\n"

// runFloodAgent is an ACP agent that writes as fast as it can: initialize
// and session/new are answered at once, and "flood N" streams N
// agent_message_chunk updates straight from a buffer, then ends the turn.
func runFloodAgent() int {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		id, method := gjson.GetBytes(line, "id").Raw, gjson.GetBytes(line, "method").Str
		switch method {
		case "initialize":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}`+"\n", id)
		case "session/new":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"f"}}`+"\n", id)
		case "session/prompt":
			n, _ := strconv.Atoi(strings.TrimPrefix(gjson.GetBytes(line, "params.prompt.0.text").Str, "flood "))
			for range n {
				out.WriteString(floodUpdate)
			}
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`+"\n", id)
		}
		out.Flush()
	}
}

// A slow editor under a 1,000,000-update flood: the editor stops reading for
// a second while the agent floods, then drains. A bridge that buffered
// without bound would hold everything the agent wrote meanwhile (about
// 200 MB); this one stops reading the agent, and its RSS stays flat.
func TestFault_SlowEditorFloodRSSFlat(t *testing.T) {
	t.Parallel()
	if _, err := vmRSS(os.Getpid()); err != nil {
		t.Skipf("cannot read RSS: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(BridgeBin, "--", exe)
	cmd.Env = append(os.Environ(), "FAKE_AGENT=flood", "XDG_STATE_HOME="+t.TempDir())
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	out := bufio.NewReaderSize(stdout, 64<<10)
	line := func() []byte {
		l, err := out.ReadSlice('\n')
		if err != nil {
			t.Fatalf("reading the bridge: %v", err)
		}
		return l
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	line()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	line()
	base, _ := vmRSS(cmd.Process.Pid)

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if rss, err := vmRSS(cmd.Process.Pid); err == nil && rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	const n = 1_000_000
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"f","prompt":[{"type":"text","text":"flood %d"}]}}`+"\n", n)
	time.Sleep(time.Second) // the editor does not read
	for got := 0; ; got++ {
		l := line()
		if gjson.GetBytes(l, "id").Raw == "3" {
			if got != n {
				t.Errorf("%d updates before the answer, want %d", got, n)
			}
			break
		}
	}
	close(stop)
	<-sampled
	growth := peak.Load() - base
	t.Logf("RSS %d MB before the flood, peak growth %d MB over %d updates", base>>20, growth>>20, n)
	if growth > 64<<20 {
		t.Errorf("RSS grew by %d MB during the flood: the bridge buffered instead of applying backpressure", growth>>20)
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
}

// A stream faster than the bridge reaches the session's transcript whole,
// checked on the built binary: no record dropped, no gap, every piece of
// text there. The flooding agent keeps ahead of the bridge, so the link's
// reads rarely wait, and on the relay's one P the store's writer runs
// only when the link waits for the editor's writer, or when the runtime
// preempts it (every 10 ms): the default queue holds 4 MiB, more than a
// link makes meanwhile. (The process benchmark checks the same of its
// streams, at full speed.)
func TestSessions_FloodTranscriptWhole(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	cmd := exec.Command(BridgeBin, "--state-dir", state, "--", exe)
	cmd.Env = append(os.Environ(), "FAKE_AGENT=flood")
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReaderSize(stdout, 64<<10)
	line := func() []byte {
		l, err := out.ReadSlice('\n')
		if err != nil {
			t.Fatalf("reading the bridge: %v; its stderr:\n%s", err, tail(stderr.String(), 16<<10))
		}
		return l
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	line()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	sid := gjson.GetBytes(line(), "result.sessionId").Str
	const n = 200_000
	fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"flood %d"}]}}`+"\n", sid, n)
	for got := 0; ; got++ {
		if gjson.GetBytes(line(), "id").Raw == "3" {
			if got != n {
				t.Fatalf("%d updates before the answer, want %d", got, n)
			}
			break
		}
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the bridge exited with %v; its stderr:\n%s", err, tail(stderr.String(), 16<<10))
	}
	if strings.Contains(stderr.String(), "records dropped") {
		t.Errorf("the bridge dropped records of the stream:\n%s", tail(stderr.String(), 16<<10))
	}
	data, err := os.ReadFile(filepath.Join(state, sid+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if gaps := bytes.Count(data, []byte(`"t":"gap"`)); gaps != 0 {
		t.Errorf("the transcript holds %d gap records", gaps)
	}
	// Each update's text is that piece four times; the store joins a run
	// of chunks into one record's text.
	if got := bytes.Count(data, []byte("0123456789abcdef")); got != 4*n {
		t.Errorf("the transcript holds %d of the stream's %d text pieces", got, 4*n)
	}
}

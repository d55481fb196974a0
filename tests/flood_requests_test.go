//go:build linux

package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func init() { ChildAgents["endless-flood"] = runEndlessFloodAgent }

// runEndlessFloodAgent is an ACP agent whose turn streams updates without a
// pause until the turn is cancelled, while it answers every other request
// at once: _test/echo with its params.
func runEndlessFloodAgent() int {
	in := bufio.NewReader(os.Stdin)
	var mu sync.Mutex // one writer at a time: the stream's bursts and the answers
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	answer := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	var cancelled atomic.Bool
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		id, method := gjson.GetBytes(line, "id").Raw, gjson.GetBytes(line, "method").Str
		switch method {
		case "initialize":
			answer(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}`, id)
		case "session/new":
			answer(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"f"}}`, id)
		case "session/cancel":
			cancelled.Store(true)
		case "_test/echo":
			answer(`{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}`, id, gjson.GetBytes(line, "params").Raw)
		case "session/prompt":
			go func() {
				for !cancelled.Load() {
					mu.Lock()
					for range 64 {
						out.WriteString(floodUpdate)
					}
					out.Flush()
					mu.Unlock()
				}
				answer(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"cancelled"}}`, id)
			}()
		}
	}
}

// The editor's requests are answered while an agent floods the bridge
// without a pause, through the built binary as an editor runs it (one P,
// stdin polled): the stream must not starve the requests, nor the requests
// the stream. Every request of 50 is answered within a few seconds (in
// practice milliseconds: what waits ahead of an answer is the editor
// queue's updates), the stream keeps flowing meanwhile, and the cancel
// ends the turn.
func TestFlood_RequestsAnsweredDuringAFlood(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(BridgeBin, "--", exe)
	cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=endless-flood"})
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()

	// The editor reads everything: updates are counted, the rest go to
	// answers by id.
	var updates atomic.Int64
	answers := make(chan []byte, 16)
	go func() {
		defer close(answers)
		out := bufio.NewReaderSize(stdout, 1<<20)
		prefix := []byte(`{"jsonrpc":"2.0","method":"session/update"`) // (floodUpdate's)
		for {
			l, err := out.ReadSlice('\n')
			if err != nil {
				return
			}
			if bytes.HasPrefix(l, prefix) {
				updates.Add(1)
				continue
			}
			answers <- slices.Clone(l)
		}
	}()
	await := func(id string, within time.Duration) []byte {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case l, ok := <-answers:
				if !ok {
					t.Fatalf("the bridge's output ended waiting for the answer to %s", id)
				}
				if gjson.GetBytes(l, "id").Raw == id {
					return l
				}
			case <-deadline:
				t.Fatalf("no answer to request %s within %v (%d updates so far)", id, within, updates.Load())
			}
		}
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	await("1", 10*time.Second)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	await("2", 10*time.Second)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"f","prompt":[{"type":"text","text":"go"}]}}`)
	for start := time.Now(); updates.Load() < 10_000; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the flood did not start: %d updates in 10 s", updates.Load())
		}
	}

	const requests = 50
	var waits []time.Duration
	before := updates.Load()
	for i := range requests {
		id := fmt.Sprint(100 + i)
		sent := time.Now()
		fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%s,"method":"_test/echo","params":{"n":%d}}`+"\n", id, i)
		if got := gjson.GetBytes(await(id, 5*time.Second), "result.echo.n"); got.Int() != int64(i) {
			t.Fatalf("request %s: echo %s, want %d", id, got.Raw, i)
		}
		waits = append(waits, time.Since(sent))
	}
	during := updates.Load() - before
	if during < requests*64 {
		t.Errorf("only %d updates reached the editor while it made %d requests: the requests starved the stream", during, requests)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"f"}}`)
	if got := gjson.GetBytes(await("3", 10*time.Second), "result.stopReason").Str; got != "cancelled" {
		t.Errorf("the turn ended with %q, want cancelled", got)
	}
	slices.Sort(waits)
	t.Logf("%d updates while %d requests were answered: p50 %v, max %v", during, requests, waits[requests/2], waits[requests-1])
	stdin.Close()
	go io.Copy(io.Discard, stdout)
}

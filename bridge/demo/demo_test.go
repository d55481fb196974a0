package demo

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer that may be written while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runDemo runs the demo with a deadline and returns what it printed.
func runDemo(t *testing.T, raw bool) string {
	t.Helper()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var out syncBuffer
	start := time.Now()
	err := Run(ctx, Options{Raw: raw, Out: &out, Version: "test"})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v\noutput:\n%s", err, out.String())
	}
	// The README promises a few seconds.
	if elapsed > 5*time.Second {
		t.Errorf("Run took %v, want under 5 s", elapsed)
	}
	checkNoLeak(t, before)
	return out.String()
}

// checkNoLeak fails when goroutines started by Run are still running a
// moment after it returned.
func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines before Run, %d after:\n%s", before, n, buf)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRun_Readable(t *testing.T) {
	out := runDemo(t, false)
	t.Logf("output:\n%s", out)
	for _, want := range []string{
		"ws://127.0.0.1:",                                    // the header names the agent's address
		"editor → initialize",                                // the handshake
		"editor → session/new",                               // session minted by the bridge
		"you    > " + filesPrompt,                            // first prompt
		"agent  Let me look at the files in this directory.", // streamed message parts joined on one line
		"Run shell code  [execute] pending — ls -la",         // the code block became a tool call
		"permission? options: Run it / Don't run it",         // "complete" with the code not run: approval asked
		"→ chose Run it",                                     // the scripted choice
		"Run shell code: in_progress",                        // console output → tool_call_update
		"✓ Run shell code: completed",                        // the next message closes the code block
		"agent  There are ",                                  // the agent's summary after running it
		"turn   end_turn",                                    // status complete → end_turn
		"you    > " + slowPrompt,                             // second prompt
		"agent  Counting: 1 2",                               // streamed before the cancel
		"editor → session/cancel",                            // the editor cancels
		"turn   cancelled",                                   // stop command, complete → stopReason cancelled
		"--raw",                                              // footer
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The readable view prints no raw frames.
	if strings.Contains(out, `"jsonrpc"`) {
		t.Errorf("readable output contains raw JSON-RPC")
	}
	if i, j := strings.Index(out, "turn   end_turn"), strings.Index(out, "turn   cancelled"); i < 0 || j < i {
		t.Errorf("end_turn must come before cancelled")
	}
}

func TestRun_Raw(t *testing.T) {
	out := runDemo(t, true)
	t.Logf("output:\n%s", out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	has := func(prefix, substr string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) && strings.Contains(l, substr) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct{ prefix, substr string }{
		// Editor side: ACP v1.
		{"→ ", `"method":"initialize"`},
		{"→ ", `"method":"session/prompt"`},
		{"→ ", `"method":"session/cancel"`},
		{"← ", `"method":"session/update"`},
		{"← ", `"agent_message_chunk"`},
		{"← ", `"method":"session/request_permission"`},
		{"→ ", `"outcome":"selected"`},
		{"← ", `"stopReason":"end_turn"`},
		{"← ", `"stopReason":"cancelled"`},
		// Agent side: the agent's own LMC JSON, no JSON-RPC.
		{"→agent ", `{"auth":`},
		{"agent→ ", `{"auth":true}`},
		{"→agent ", `{"role":"user","type":"message","content":"list the files"}`},
		{"agent→ ", `"type":"code","format":"shell","content":"ls -la"`},
		{"→agent ", `"type":"command","content":"go"`},
		{"agent→ ", `"type":"console","format":"output"`},
		{"→agent ", `"type":"command","content":"stop"`},
		{"agent→ ", `{"role":"server","type":"status","content":"complete"}`},
	} {
		if !has(c.prefix, c.substr) {
			t.Errorf("raw output has no %q line containing %s", c.prefix, c.substr)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "→agent ") || strings.HasPrefix(l, "agent→ ") {
			if strings.Contains(l, `"jsonrpc"`) {
				t.Errorf("the agent's side is not its own format: %q", l)
			}
		}
		switch {
		case strings.HasPrefix(l, "→ "), strings.HasPrefix(l, "← "),
			strings.HasPrefix(l, "→agent "), strings.HasPrefix(l, "agent→ "),
			strings.HasPrefix(l, "# "):
		default:
			t.Errorf("raw output line %q is neither a frame nor a comment", l)
		}
	}
}

func TestRun_ContextCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Out: &syncBuffer{}}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run with a cancelled context returned nil")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

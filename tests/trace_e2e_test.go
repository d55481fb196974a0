package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

// stopBridge ends a bridge the way an editor does, closing its input, and
// waits for it to exit (so that its trace and transcripts are flushed).
func stopBridge(t *testing.T, b *Bridge) {
	t.Helper()
	b.In.Close()
	if _, ok := b.WaitExit(WaitTimeout); !ok {
		t.Fatal("bridge did not exit after stdin closed")
	}
}

// --trace records both hops in both directions with session ids, every
// editor-bound line byte-exact and in order, and the bridge's decision to
// end an ignored cancel after the grace period, where it happened.
func TestTrace_BothHopsAndCancelGrace(t *testing.T) {
	t.Parallel()
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		path := filepath.Join(t.TempDir(), "trace.ndjson")
		e := NewEditor(t, tr, EditorOptions{Args: []string{"--trace", path, "--cancel-grace", "300ms"}})
		sid := e.Start(t)
		if res, err := e.Prompt(ctxT(t), sid, "hello"); err != nil || res.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt: %+v, %v", res, err)
		}
		done := promptAsync(ctxT(t), e, sid, "ignore-cancel")
		waitUntil(t, WaitTimeout, "tick-1", func() bool { return slices.Contains(e.Fake.Chunks(sid), "tick-1") })
		if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
		if r := await(t, done, "cancelled prompt"); r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
			t.Fatalf("cancelled prompt: %+v, %v", r.res, r.err)
		}
		stopBridge(t, e.Bridge)

		recs, err := trace.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		var editorOut [][]byte
		for _, r := range recs {
			count[r.Hop+"/"+r.Dir]++
			if r.Hop == "editor" && r.Dir == "out" {
				editorOut = append(editorOut, r.Message())
			}
		}
		for _, k := range []string{"editor/in", "editor/out", "agent/in", "agent/out"} {
			if count[k] == 0 {
				t.Errorf("no %s records; counts %v", k, count)
			}
		}
		// What the editor read is exactly what the trace says was sent.
		lines := e.Out.Lines()
		if len(editorOut) != len(lines) {
			t.Errorf("trace has %d editor-bound messages, stdout had %d lines", len(editorOut), len(lines))
		}
		for i := range min(len(editorOut), len(lines)) {
			if !bytes.Equal(editorOut[i], lines[i].Raw) {
				t.Errorf("editor-bound message %d:\n trace  %s\n stdout %s", i, editorOut[i], lines[i].Raw)
			}
		}

		// The prompt request carries its session; the grace note sits
		// between the editor's cancel and the bridge's cancelled answer.
		cancelAt, noteAt, answerAt := -1, -1, -1
		for i, r := range recs {
			switch {
			case r.Hop == "editor" && r.Dir == "in" && r.Kind == "request" && r.Method == "session/prompt":
				if r.Session != string(sid) || len(r.ID) == 0 {
					t.Errorf("prompt record without its session or id: %+v", r)
				}
			case r.Hop == "editor" && r.Dir == "in" && r.Method == "session/cancel":
				cancelAt = i
			case r.Kind == "note" && r.Note == "cancel-grace":
				noteAt = i
				if r.Hop != "bridge" || r.Session != string(sid) || !strings.Contains(r.Detail, "300ms") {
					t.Errorf("cancel-grace note = %+v", r)
				}
			case r.Hop == "editor" && r.Dir == "out" && r.Kind == "response" && strings.Contains(string(r.Msg), `"cancelled"`):
				answerAt = i
			}
		}
		if !(cancelAt >= 0 && cancelAt < noteAt && noteAt < answerAt) {
			t.Errorf("cancel at %d, cancel-grace note at %d, cancelled answer at %d; want them in that order", cancelAt, noteAt, answerAt)
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].TNs < recs[i-1].TNs {
				t.Errorf("t_ns goes back at record %d", i)
			}
		}
	})
}

// --trace-max (here ACP_BRIDGE_TRACE_MAX) stops the trace at its cap with a
// note, and the bridge goes on serving.
func TestTrace_Cap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "trace.ndjson")
	// The cap through its environment twin, the file through the flag.
	child := ChildTransport("acp")
	tr := Transport{Name: "child", Start: func(t *testing.T) Agent {
		a := child.Start(t)
		a.Env = append(a.Env, "ACP_BRIDGE_TRACE_MAX=8KiB")
		return a
	}}
	e := NewEditor(t, tr, EditorOptions{Args: []string{"--trace", path}})
	sid := e.Start(t)
	if res, err := e.Prompt(ctxT(t), sid, "stream 200"); err != nil || res.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", res, err)
	}
	if n := len(e.Fake.Chunks(sid)); n != 200 {
		t.Errorf("editor got %d chunks, want 200", n)
	}
	stopBridge(t, e.Bridge)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 8<<10 {
		t.Errorf("trace is %d bytes, over its 8KiB cap", st.Size())
	}
	recs, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 5 {
		t.Fatalf("only %d records", len(recs))
	}
	if last := recs[len(recs)-1]; last.Note != trace.NoteTruncated {
		t.Errorf("last record = %+v, want the %s note", last, trace.NoteTruncated)
	}
}

// A secret (a handshake header's value from the environment) that crosses
// both hops inside frames never reaches the trace or the log.
func TestTrace_SecretCanary(t *testing.T) {
	t.Parallel()
	const canary = "canary-trace-5d1e77b2"
	path := filepath.Join(t.TempDir(), "trace.ndjson")
	ws := WSTransport(nil)
	tr := Transport{Name: "ws", Start: func(t *testing.T) Agent {
		a := ws.Start(t)
		a.Env = append(a.Env, "ACP_TEST_TOKEN=Bearer "+canary)
		return a
	}}
	e := NewEditor(t, tr, EditorOptions{Args: []string{"--trace", path, "--header", "Authorization=ACP_TEST_TOKEN", "--log-level", "trace"}})
	sid := e.Start(t)
	if _, err := e.Prompt(ctxT(t), sid, "say "+canary); err != nil {
		t.Fatal(err)
	}
	// The agent echoes it; the editor sees it scrubbed.
	if !slices.Contains(e.Fake.Chunks(sid), "echo:say <redacted>") {
		t.Fatalf("the editor did not see the agent's echo scrubbed: %q", e.Fake.Chunks(sid))
	}
	stopBridge(t, e.Bridge)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(canary)) {
		t.Errorf("the canary reached the trace:\n%s", data)
	}
	if n := bytes.Count(data, []byte("<redacted>")); n < 2 {
		t.Errorf("trace has %d redactions, want the prompt and the echo on both hops", n)
	}
	if _, err := trace.ReadFile(path); err != nil {
		t.Errorf("scrubbed trace does not read back: %v", err)
	}
	if strings.Contains(e.Stderr(), canary) {
		t.Errorf("the canary reached the log")
	}
	if !strings.Contains(e.Stderr(), "<redacted>") {
		t.Errorf("the log never showed the frames (no <redacted>); the canary check proves nothing:\n%s", tail(e.Stderr(), 4000))
	}
}

// A --trace-max that is not a size is a usage error naming the flag, and
// nothing is served.
func TestTrace_BadMax(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(BridgeBin, "--trace", filepath.Join(t.TempDir(), "t"), "--trace-max", "lots", "--", "true")
	cmd.Env = hermeticEnv(t, nil)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--trace-max") {
		t.Errorf("exit %v, output %s; want status 2 naming --trace-max", err, out)
	}
}

// TestTrace_ExportOTLP: a trace the bridge recorded exports as OTLP/JSON
// spans, one invoke_agent span per turn.
func TestTrace_ExportOTLP(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.trace")
	e := NewEditor(t, ChildTransport("acp"), EditorOptions{Args: []string{"--trace", path}})
	sid := e.Start(t)
	for _, p := range []string{"hello", "stream 3"} {
		if _, err := e.Prompt(ctxT(t), sid, p); err != nil {
			t.Fatal(err)
		}
	}
	stopBridge(t, e.Bridge)
	out := filepath.Join(t.TempDir(), "spans.json")
	cmd := exec.Command(BridgeBin, "trace", "export", path, "-o", out)
	cmd.Env = hermeticEnv(t, nil)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("trace export: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct{ Name, TraceID, SpanID string }
			}
		}
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.ResourceSpans) != 1 {
		t.Fatalf("%v\n%s", err, data)
	}
	turns := 0
	for _, s := range doc.ResourceSpans[0].ScopeSpans[0].Spans {
		if s.Name == "invoke_agent" {
			turns++
		}
	}
	if turns != 2 {
		t.Errorf("%d invoke_agent spans, want one per turn (2)\n%s", turns, data)
	}
}

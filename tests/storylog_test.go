package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// storySession plays one scripted session on a bridge started with flags
// in front of the child fake agent: two turns, "stream 3" (three updates)
// and an echo of a canary, then closes the editor's input and returns the
// bridge's stderr once it has exited.
func storySession(t *testing.T, flags ...string) string {
	t.Helper()
	b := startRaw(t, flags...)
	rawInit(t, b)
	sid := rawNewSession(t, b, "2")
	for i, text := range []string{"stream 3", "canary-body-7f3 is a body"} {
		id := fmt.Sprint(10 + i)
		b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, sid, text))
		for {
			l := b.Next(WaitTimeout)
			if l.ID() == id {
				if l.Get("result.stopReason").Str != "end_turn" {
					t.Fatalf("prompt %s answered %s", id, l)
				}
				break
			}
		}
	}
	b.In.Close()
	if _, ok := b.WaitExit(WaitTimeout); !ok {
		t.Fatal("the bridge did not exit after its input closed")
	}
	return b.Stderr()
}

// At the default level the log tells the story of the session, one line
// per session start and end and per turn, with the turn's stop reason,
// duration, update count and bytes, and never a message body.
func TestStoryLogInfo(t *testing.T) {
	stderr := storySession(t) // no --log-level: info
	var turns []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "turn ended") {
			turns = append(turns, line)
		}
	}
	if len(turns) != 2 {
		t.Fatalf("want 2 'turn ended' lines, got %d:\n%s", len(turns), stderr)
	}
	for _, want := range []string{"stop_reason=end_turn", "updates=3", "duration=", "bytes=", "session="} {
		if !strings.Contains(turns[0], want) {
			t.Errorf("first turn line lacks %q: %s", want, turns[0])
		}
	}
	if !strings.Contains(turns[1], "updates=1") {
		t.Errorf("second turn line: %s", turns[1])
	}
	for _, want := range []string{"session opened", "session ended"} {
		if strings.Count(stderr, want) != 1 {
			t.Errorf("want one %q line:\n%s", want, stderr)
		}
	}
	// Bodies: the prompt's and the updates' text.
	for _, body := range []string{"canary-body-7f3", "chunk-0000", `"method"`} {
		if strings.Contains(stderr, body) {
			t.Errorf("INFO log carries a body (%q):\n%s", body, stderr)
		}
	}
}

// At DEBUG one line per message says its direction, method, id, size and,
// for an answer, the latency since its request; still no bodies. At TRACE
// the bodies appear.
func TestStoryLogDebugAndTrace(t *testing.T) {
	stderr := storySession(t, "--log-level", "debug")
	var sawAnswer bool
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "message:") && strings.Contains(line, "kind=result") && strings.Contains(line, "method=session/prompt") {
			sawAnswer = true
			for _, want := range []string{"hop=", "dir=", "id=", "size=", "latency="} {
				if !strings.Contains(line, want) {
					t.Errorf("answer line lacks %q: %s", want, line)
				}
			}
		}
	}
	if !sawAnswer {
		t.Errorf("no DEBUG line for the answer of session/prompt:\n%s", stderr)
	}
	if strings.Contains(stderr, "canary-body-7f3") {
		t.Errorf("DEBUG log carries a body:\n%s", stderr)
	}
	if trace := storySession(t, "--log-level", "trace"); !strings.Contains(trace, "canary-body-7f3") {
		t.Errorf("TRACE log lacks the bodies:\n%s", trace)
	}
}

// --log-format json writes one JSON object a line, for collectors, and the
// story's fields are JSON fields.
func TestStoryLogJSON(t *testing.T) {
	stderr := storySession(t, "--log-format", "json")
	var turns int
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stderr line is not JSON: %v\n%s", err, line)
		}
		if m["@message"] == "turn ended" {
			turns++
			if m["stop_reason"] != "end_turn" || m["updates"] == nil || m["@level"] != "info" {
				t.Errorf("turn line: %s", line)
			}
		}
	}
	if turns != 2 {
		t.Errorf("want 2 turn lines, got %d:\n%s", turns, stderr)
	}
}

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/clock"
)

// exitPromise is the promised bound on the time from the end of the
// editor's input (serve: SIGTERM) to the bridge's exit.
const exitPromise = 3 * time.Second

// writeStoredSessions puts n sessions in dir in the state directory's
// format (a transcript of one turn and its listing data each, dated
// within the last n minutes), as earlier bridges leave them.
func writeStoredSessions(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	for i := range n {
		sid := fmt.Sprintf("stored-%04d", i)
		at := now.Add(-time.Duration(n-i) * time.Minute).UTC()
		stamp := at.Format(time.RFC3339Nano)
		transcript := `{"t":"meta","at":"` + stamp + `","agent":"tests.test","dialect":"acp","cwd":"/tmp"}` + "\n" +
			`{"t":"prompt","at":"` + stamp + `","body":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"turn ` + strconv.Itoa(i) + `"}]}}` + "\n" +
			`{"t":"u","u":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"answer"}}}` + "\n" +
			`{"t":"stop","at":"` + stamp + `","body":{"stopReason":"end_turn"}}` + "\n"
		meta, _ := json.Marshal(map[string]any{"sessionId": sid, "cwd": "/tmp", "title": "turn " + strconv.Itoa(i),
			"agent": "tests.test", "dialect": "acp", "createdAt": at, "updatedAt": at})
		if err := os.WriteFile(filepath.Join(dir, sid+".ndjson"), []byte(transcript), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sid+".json"), meta, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// With 1,000 sessions on disk, a burst of 300 session/new and then the end
// of the editor's input: the bridge exits 0 within 3 s of the end of its
// input (the store's work per new session does not grow with the sessions
// on disk), every session/new answered once, and the stored sessions are
// still listed.
func TestSessions_ThousandOnDiskBurstThenEndOfInput(t *testing.T) {
	t.Parallel()
	const stored, burst = 1000, 300
	state := t.TempDir()
	writeStoredSessions(t, state, stored)
	b := StartBridge(t, []string{"--state-dir", state, "--", selfExe(t)}, []string{"FAKE_AGENT=acp"}, nil)
	b.WriteLine(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if l := b.Next(WaitTimeout); !l.Get("result").Exists() {
		t.Fatalf("initialize: %s", l)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":"list","method":"session/list","params":{}}`)
	if l := b.Next(WaitTimeout); len(l.Get("result.sessions").Array()) == 0 || !l.Get("result.nextCursor").Exists() {
		t.Fatalf("session/list of %d stored sessions: %s", stored, l)
	}
	burstStart := time.Now()
	for i := 1; i <= burst; i++ {
		b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, i))
	}
	answered := map[string]int{}
	for len(answered) < burst {
		l := b.Next(WaitTimeout)
		if l.IsResponse() {
			if !l.Get("result.sessionId").Exists() {
				t.Fatalf("session/new: %s", l)
			}
			answered[l.ID()]++
		}
	}
	t.Logf("%d session/new answered in %v", burst, time.Since(burstStart).Round(time.Millisecond))
	start := time.Now()
	b.In.Close()
	code, ok := b.WaitExit(60 * time.Second)
	took := time.Since(start)
	t.Logf("exit %d %v after the end of input", code, took.Round(time.Millisecond))
	if !ok {
		t.Fatal("still running 60 s after the end of its input")
	}
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if took > exitPromise {
		t.Errorf("exit took %v after the end of input beside %d stored sessions, promised %v", took.Round(time.Millisecond), stored, exitPromise)
	}
	for _, l := range b.Out.Lines() {
		if l.IsResponse() && l.ID() != "0" && l.ID() != `"list"` {
			answered[l.ID()]--
		}
	}
	for id, n := range answered {
		if n != 0 {
			t.Errorf("session/new %s answered %d times", id, 1-n)
		}
	}
	entries, _ := os.ReadDir(state)
	sidecars := 0
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".json" {
			sidecars++
		}
	}
	if sidecars != stored+burst {
		t.Errorf("%d sessions listed on disk, want the %d stored and the %d new", sidecars, stored, burst)
	}
}

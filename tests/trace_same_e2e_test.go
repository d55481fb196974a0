package tests

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// runFacts are what differs between two runs of one session by nature: the
// port of a WebSocket agent started anew, the fake agent's pid.
var runFacts = regexp.MustCompile(`"agent":"127\.0\.0\.1:\d+"|"pid":\d+`)

// TestTrace_EditorReceivesTheSameBytes: tracing observes what users run and
// changes nothing the editor receives. The same session (a streamed turn,
// then a turn whose tool call asks the editor's permission) is played
// through the built binary as an editor starts it, plainly, with --trace
// and with trace-level logging, on each transport; every line the editor
// receives is compared byte for byte with the plain run's, but for the
// run's own facts (runFacts).
func TestTrace_EditorReceivesTheSameBytes(t *testing.T) {
	ForEachTransport(t, func(t *testing.T, tr Transport) {
		cwd := t.TempDir()
		play := func(t *testing.T, flags ...string) []string {
			agent := tr.Start(t)
			args := append(append([]string{"--state-dir", t.TempDir()}, flags...), agent.Args...)
			b := StartBridge(t, args, agent.Env, nil)
			b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}`)
			responseBy(t, b.Out, "1", time.Now().Add(WaitTimeout))
			b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + cwd + `","mcpServers":[]}}`)
			sid := responseBy(t, b.Out, "2", time.Now().Add(WaitTimeout)).Get("result.sessionId").Str
			b.WriteLine(rawPrompt("3", sid, "stream 300"))
			if l := responseBy(t, b.Out, "3", time.Now().Add(WaitTimeout)); l.Get("result.stopReason").Str != "end_turn" {
				t.Fatalf("the streamed turn ended with %s", l)
			}
			b.WriteLine(rawPrompt("4", sid, "permission"))
			ask, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return l.Method() == "session/request_permission" })
			if !ok {
				t.Fatal("no permission request reached the editor")
			}
			b.WriteLine(`{"jsonrpc":"2.0","id":` + ask.Get("id").Raw + `,"result":{"outcome":{"outcome":"selected","optionId":"allow-once"}}}`)
			if l := responseBy(t, b.Out, "4", time.Now().Add(WaitTimeout)); l.Get("result.stopReason").Str != "end_turn" {
				t.Fatalf("the permission turn ended with %s", l)
			}
			var got []string
			for _, l := range b.Out.Lines() {
				got = append(got, runFacts.ReplaceAllString(string(l.Raw), "RUN"))
			}
			return got
		}
		plain := play(t)
		if len(plain) < 300 {
			t.Fatalf("the plain run gave the editor %d lines, want the 300 chunks and more", len(plain))
		}
		for name, flags := range map[string][]string{
			"--trace":           {"--trace", filepath.Join(t.TempDir(), "t.ndjson")},
			"--log-level trace": {"--log-level", "trace"},
		} {
			got := play(t, flags...)
			if len(got) != len(plain) {
				t.Errorf("with %s the editor received %d lines, plainly %d", name, len(got), len(plain))
			}
			for i := range min(len(got), len(plain)) {
				if got[i] != plain[i] {
					t.Errorf("with %s line %d differs:\n  plain: %s\n  %s: %s", name, i, truncate(plain[i], 300), name, truncate(got[i], 300))
					break
				}
			}
		}
	})
}

package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A transcript whose last turn has a prompt and no stop, left by a
// holder that ended without letting go (its lock file and pid still
// there: killed), was interrupted mid-turn: the next Acquire marks it with
// one gap record, once; a transcript at rest gets none, and nor does one
// whose holder let go cleanly. Tails are made in the file format directly,
// with turns and lines longer than the reader's block, and torn last
// lines.
func TestStore_AcquireMarksAnInterruptedTurn(t *testing.T) {
	const (
		prompt = `{"t":"prompt","at":"2026-01-01T00:00:00Z","body":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}` + "\n"
		stop   = `{"t":"stop","at":"2026-01-01T00:00:01Z","body":{"stopReason":"end_turn"}}` + "\n"
		meta   = `{"t":"meta","at":"2026-01-01T00:00:00Z","agent":"a","cwd":"/w"}` + "\n"
	)
	upd := func(text string) string {
		return `{"t":"u","u":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}}` + "\n"
	}
	many := strings.Repeat(upd("chunk"), 1500) // ~135 KB: several blocks
	long := upd(strings.Repeat("x", 200<<10))  // one line over three blocks
	gap := `{"t":"gap","body":{"interrupted":true,"cause":"x"}}` + "\n"
	cases := []struct {
		name, body string
		want       bool
	}{
		{"empty", "", false},
		{"meta only", meta, false},
		{"turn ended", meta + prompt + upd("a") + stop, false},
		{"turn ended, late update", meta + prompt + upd("a") + stop + upd("late"), false},
		{"prompt only", meta + prompt, true},
		{"prompt first line", prompt, true},
		{"open turn", meta + prompt + upd("a") + stop + prompt + upd("b"), true},
		{"open long turn", meta + prompt + stop + prompt + many + long + many, true},
		{"ended long turn", meta + prompt + many + long + many + stop, false},
		{"open turn, torn tail", meta + prompt + upd("a") + `{"t":"u","u":{"sessionUp`, true},
		{"ended turn, torn prompt", meta + prompt + stop + `{"t":"prompt","at":"2026`, false},
		{"marked already", meta + prompt + upd("a") + gap, false},
		{"marked, then a new open turn", meta + prompt + gap + prompt + upd("b"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			s := open(t, Options{Dir: dir})
			create(t, s, "s", Meta{Cwd: "/w"})
			lp := lockPath(dir, "s")
			lockFiles := exists(t, lp) // (not where there is no flock)
			s.Release("s")
			s.barrier()
			tp := filepath.Join(dir, "s.ndjson")
			if err := os.WriteFile(tp, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if lockFiles {
				// Let go cleanly: nothing is marked.
				if _, err := s.Acquire("s"); err != nil {
					t.Fatal(err)
				}
				tr, _ := load(t, s, "s")
				if n := len(tr.Records); n > 0 && tr.Records[n-1].Kind == KindGap && !strings.Contains(c.body, `"interrupted"`) {
					t.Errorf("a transcript its holder let go of got a gap record")
				}
				s.Release("s")
				s.barrier()
				// The holder killed: its lock file stays, with its pid.
				if err := os.WriteFile(lp, []byte("2147483646\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Acquire("s"); err != nil {
				t.Fatal(err)
			}
			tr, err := load(t, s, "s")
			if err != nil {
				t.Fatal(err)
			}
			gaps := 0
			for _, r := range tr.Records {
				if r.Kind == KindGap && strings.Contains(string(r.Body), `"interrupted":true`) {
					gaps++
				}
			}
			if n := len(tr.Records); c.want && (n == 0 || tr.Records[n-1].Kind != KindGap) {
				t.Errorf("the last record is not the gap record: %+v", tr.Records[max(n-1, 0):])
			}
			want := strings.Count(c.body, `"interrupted":true`)
			if c.want {
				want++
			}
			if gaps != want {
				t.Errorf("%d interrupted-turn gap records, want %d", gaps, want)
			}
			// Taken again after another kill: marked once only.
			s.Release("s")
			s.barrier()
			if lockFiles {
				if err := os.WriteFile(lp, []byte("2147483646\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Acquire("s"); err != nil {
				t.Fatal(err)
			}
			tr, _ = load(t, s, "s")
			again := 0
			for _, r := range tr.Records {
				if r.Kind == KindGap && strings.Contains(string(r.Body), `"interrupted":true`) {
					again++
				}
			}
			if again != want {
				t.Errorf("after a second Acquire: %d gap records, want %d", again, want)
			}
		})
	}
}

package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
)

// visible is what a terminal shows of s: "\r\x1b[K" erases the current
// line.
func visible(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "\r\x1b[K")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		cur := b.String()
		b.Reset()
		b.WriteString(cur[:strings.LastIndex(cur, "\n")+1])
		s = s[i+len("\r\x1b[K"):]
	}
}

// On a terminal the demo shows which step it is on, and the status line is
// erased before the conversation goes on: what remains on the screen is the
// conversation alone, line for line.
func TestRun_Progress(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var screen syncBuffer // stdout and stderr on one terminal
	err := Run(ctx, Options{Out: &screen, Version: "test", Progress: launch.NewProgressTo(&screen)})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, screen.String())
	}
	raw := screen.String()
	for _, step := range []string{"… demo: starting the demo agent", "… demo: initialize", "… demo: first prompt", "… demo: second prompt", "… demo: shutting the bridge down"} {
		if !strings.Contains(raw, step) {
			t.Errorf("no step %q in:\n%q", step, raw)
		}
	}
	shown := visible(raw)
	if strings.Contains(shown, "… demo:") {
		t.Errorf("a status line stayed on the screen:\n%s", shown)
	}
	for _, want := range []string{"\neditor → initialize", "\nyou    > " + filesPrompt, "\nturn   end_turn\n", "\nturn   cancelled\n"} {
		if !strings.Contains(shown, want) {
			t.Errorf("screen lacks %q:\n%s", want, shown)
		}
	}
}

package trace

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// The page has an arrow per message and a note per annotation, requests
// point at their responses and back (per hop and link: the same id on the
// other hop is another request), a response inherits its request's method
// and session for the filters, and message text cannot break out of the
// page.
func TestWriteHTML(t *testing.T) {
	mk := func(hop, dir string, link int, msg string) Record {
		r := Record{Hop: hop, Dir: dir, Link: link}
		Classify(&r, []byte(msg))
		return r
	}
	recs := []Record{
		mk("editor", "in", 0, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s-1","prompt":"</script><script>alert(1)</script>"}}`),
		mk("agent", "out", 1, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s-1"}}`),
		{Hop: "bridge", Kind: KindNote, Note: "cancel-grace", Session: "s-1"},
		mk("agent", "in", 1, `{"jsonrpc":"2.0","id":1,"result":{}}`),
		mk("editor", "out", 0, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`),
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", recs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, `<div class="arrow `); n != 4 {
		t.Errorf("%d arrows, want 4", n)
	}
	if n := strings.Count(page, `<div class="note"`); n != 1 {
		t.Errorf("%d notes, want 1", n)
	}
	if n := strings.Count(page, `class="lane `); n != 3 {
		t.Errorf("%d lanes, want 3", n)
	}
	pairs := map[string]string{}
	for _, m := range regexp.MustCompile(`id="r(\d+)" data-i="\d+" data-pair="(-?\d+)"`).FindAllStringSubmatch(page, -1) {
		pairs[m[1]] = m[2]
	}
	want := map[string]string{"0": "4", "4": "0", "1": "3", "3": "1"}
	for k, v := range want {
		if pairs[k] != v {
			t.Errorf("arrow r%s paired with %q, want r%s (all: %v)", k, pairs[k], v, pairs)
		}
	}
	if !strings.Contains(page, `<div class="row" data-i="4" data-session="s-1" data-method="session/prompt">`) {
		t.Error("the editor's answer does not carry its request's session and method")
	}
	if strings.Contains(page, "<script>alert(1)") {
		t.Error("message text broke out of the page's script")
	}
}

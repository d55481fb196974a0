package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	// A response names its request; the page's script tells the request.
	want := map[string]string{"0": "-1", "4": "0", "1": "-1", "3": "1"}
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

// The panel's text is json.Indent's within the caps; a value nested past
// ViewMaxDepth is a marker, and a deep message costs a page proportional
// to its size, not to its depth squared (the 9,000-deep updates
// made a 1.5 GB page).
func TestView_DeepMessageBounded(t *testing.T) {
	for _, msg := range []string{`{"a":[1,2,{"b":"c\"]}"}],"e":{},"f":[ ]}`, `"s"`, `[[[]]]`} {
		var got, want bytes.Buffer
		indent(&got, []byte(msg), ViewMaxDepth, ViewMaxBytes)
		json.Indent(&want, []byte(msg), "", "  ")
		if got.String() != want.String() {
			t.Errorf("indent(%s) =\n%s\nwant\n%s", msg, got.String(), want.String())
		}
	}
	const depth = 9000
	deep := `{"jsonrpc":"2.0","method":"session/update","params":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	var recs []Record
	for range 5 {
		r := Record{Hop: "agent", Dir: "in"}
		Classify(&r, []byte(deep))
		recs = append(recs, r)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "deep", recs); err != nil {
		t.Fatal(err)
	}
	if n := buf.Len(); n > 5*len(deep)+64<<10 {
		t.Errorf("page of 5 %d-byte messages is %d bytes", len(deep), n)
	}
	if !strings.Contains(buf.String(), "more levels") {
		t.Errorf("no elided marker for the deep values")
	}
	big := `{"s":"` + strings.Repeat("x", 3*ViewMaxBytes) + `"}`
	var out bytes.Buffer
	indent(&out, []byte(big), ViewMaxDepth, ViewMaxBytes)
	if out.Len() > ViewMaxBytes+200 || !strings.Contains(out.String(), "elided") {
		t.Errorf("a %d-byte message shows as %d bytes", len(big), out.Len())
	}
}

// FuzzView: any records make a page without error, its size linear in
// theirs, and a valid message within the caps shows as json.Indent shows it.
func FuzzView(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1,{}]}}`, "editor", "in", uint8(0))
	f.Add(strings.Repeat("[", 300)+strings.Repeat("]", 300), "agent", "out", uint8(1))
	f.Add(`not json </script>`, "agent", "in", uint8(2))
	f.Fuzz(func(t *testing.T, msg, hop, dir string, kind uint8) {
		r := Record{Hop: hop, Dir: dir, Note: hop}
		switch kind % 3 {
		case 0:
			Classify(&r, []byte(msg))
		case 1:
			r.Kind, r.Raw = KindFrame, msg
		default:
			r.Kind, r.Detail = KindNote, msg
		}
		var page bytes.Buffer
		if err := WriteHTML(&page, hop, []Record{r, r}); err != nil {
			t.Fatal(err)
		}
		if page.Len() > 64<<10+40*(len(msg)+len(hop)+len(dir)) {
			t.Fatalf("page of %d bytes for a %d-byte message", page.Len(), len(msg))
		}
		if json.Valid([]byte(msg)) {
			var got, want bytes.Buffer
			indent(&got, []byte(msg), ViewMaxDepth, ViewMaxBytes)
			json.Indent(&want, []byte(msg), "", "  ")
			// json.Indent keeps white space around the value; the view
			// does not need it.
			if want.Len() < ViewMaxBytes && !strings.Contains(got.String(), "more levels") && strings.TrimSpace(got.String()) != strings.TrimSpace(want.String()) {
				t.Fatalf("indent(%q) = %q, want %q", msg, got.String(), want.String())
			}
		}
	})
}

// The JSON panel's text sits next to its arrow as a JSON string the page's
// script parses: it must come back exactly, whatever the message holds.
func TestView_PanelTextRoundTrips(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"</script><!-- \u2028 & ' \" \\ é 😀"}}`
	r := Record{Hop: "editor", Dir: "in"}
	Classify(&r, []byte(msg))
	var page bytes.Buffer
	if err := WriteHTML(&page, "t", []Record{r}); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<script type="application/json" id="p0">(.*?)</script>`).FindStringSubmatch(page.String())
	if m == nil {
		t.Fatalf("no panel text in the page")
	}
	var got string
	if err := json.Unmarshal([]byte(m[1]), &got); err != nil {
		t.Fatalf("panel text %s is not a JSON string: %v", m[1], err)
	}
	var want bytes.Buffer
	json.Indent(&want, []byte(msg), "", "  ")
	if got != want.String() {
		t.Errorf("panel text = %q, want %q", got, want.String())
	}
}

// Arrows say what they carry: a session/update its kind (the sessionUpdate
// or a legacy @type), a response the time since its request.
func TestView_UpdateKindsAndLatencies(t *testing.T) {
	mk := func(dir string, tns int64, msg string) Record {
		r := Record{Hop: "agent", Dir: dir, Link: 1, TNs: tns}
		Classify(&r, []byte(msg))
		return r
	}
	recs := []Record{
		mk("out", 1_000_000, `{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s"}}`),
		mk("in", 2_000_000, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t"}}}`),
		mk("in", 3_000_000, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"@type":"agent_message_text","text":"x"}}}`),
		mk("in", 1_235_000_000, `{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}`),
		mk("in", 1_236_000_000, `{"jsonrpc":"2.0","id":99,"result":{}}`), // answers nothing: no latency
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", recs); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`<span class="label">session/update tool_call</span>`,
		`<span class="label">session/update agent_message_text</span>`,
		`<span class="label">result #7 · 1234 ms</span>`,
		`<span class="label">result #99</span>`,
		`scrollIntoView`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// A long trace is viewed as pages of ViewPageSize records, each linked to
// the next and back, each a page a browser loads at once (a single page of
// 50,000 messages was 67 MB and took a minute; any trace is now pages of
// at most ViewPageSize records); numbering and request/response pairing go
// on across pages. Three pages, the last holding the odd records, make
// the class: a 50,000-message trace is 25 of them.
func TestWriteViewFile_Pages(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "big.trace")
	var b bytes.Buffer
	const n = 2*ViewPageSize + 2
	b.WriteString(`{"t_ns":0,"time":"2026-01-01T00:00:00Z","hop":"editor","dir":"in","kind":"request","method":"session/prompt","id":1,"session":"s","msg":{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}}` + "\n")
	for i := 1; i < n-1; i++ {
		fmt.Fprintf(&b, `{"t_ns":%d,"time":"2026-01-01T00:00:00Z","hop":"editor","dir":"out","kind":"notification","method":"session/update","session":"s","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d of the model's answer"}}}}}`+"\n", i*1000, i)
	}
	fmt.Fprintf(&b, `{"t_ns":%d,"time":"2026-01-01T00:00:00Z","hop":"editor","dir":"out","kind":"response","id":1,"msg":{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}}`+"\n", n*1000)
	if err := os.WriteFile(in, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "big.html")
	got, err := WriteViewFile(in, out)
	if err != nil || got != n {
		t.Fatalf("WriteViewFile = %d, %v", got, err)
	}
	pages := (n + ViewPageSize - 1) / ViewPageSize
	for k := 1; k <= pages+1; k++ {
		page, err := os.ReadFile(PageName(out, k))
		if k == pages+1 {
			if err == nil {
				t.Errorf("page %d exists, want %d pages", k, pages)
			}
			break
		}
		if err != nil {
			t.Fatalf("page %d: %v", k, err)
		}
		s := string(page)
		if size := len(page); size > 4<<20 {
			t.Errorf("page %d is %d bytes", k, size)
		}
		if arrows := strings.Count(s, `<div class="arrow `); arrows > ViewPageSize {
			t.Errorf("page %d has %d arrows", k, arrows)
		}
		if first := fmt.Sprintf(`id="r%d"`, (k-1)*ViewPageSize); !strings.Contains(s, first) {
			t.Errorf("page %d lacks record #%d", k, (k-1)*ViewPageSize)
		}
		if hasNext := strings.Contains(s, `href="`+filepath.Base(PageName(out, k+1))+`">next page`); hasNext != (k < pages) {
			t.Errorf("page %d: next link %v", k, hasNext)
		}
		if hasPrev := strings.Contains(s, `href="`+filepath.Base(PageName(out, k-1))+`">← previous page`); hasPrev != (k > 1) {
			t.Errorf("page %d: previous link %v", k, hasPrev)
		}
		if k == pages && !strings.Contains(s, `data-pair="0"`) {
			t.Error("the last page's answer is not paired with the request on page 1")
		}
	}
}

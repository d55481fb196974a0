package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// viewTuple is a record as the page holds it (see View).
type viewTuple struct {
	Ms                     float64
	Kind, Hop, Dir         string
	Link                   int
	Session, Method, Label string
	Pair                   int
	Indent                 bool
	Body                   string
}

// scriptBlock returns the text of the page's script block with the id.
func scriptBlock(page, id string) (string, bool) {
	_, rest, ok := strings.Cut(page, `<script type="application/json" id="`+id+`">`)
	text, _, ok2 := strings.Cut(rest, "</script>")
	return text, ok && ok2
}

// viewTuples decodes the records a page holds, or with last only the
// last of them.
func viewTuples(t *testing.T, page string, last bool) []viewTuple {
	t.Helper()
	recs, ok := scriptBlock(page, "records")
	table, ok2 := scriptBlock(page, "strings")
	if !ok || !ok2 {
		t.Fatalf("the page lacks its records or strings")
	}
	var strs []string
	if err := json.Unmarshal([]byte(table), &strs); err != nil {
		t.Fatalf("strings: %v", err)
	}
	if last {
		// A tuple a line: "[" then ",\n[...]" for each.
		recs = "[" + recs[strings.LastIndex(recs, "\n[")+1:]
	}
	var raw [][]json.RawMessage
	if err := json.Unmarshal([]byte(recs), &raw); err != nil {
		t.Fatalf("records: %v", err)
	}
	var out []viewTuple
	for _, r := range raw {
		if len(r) != 11 {
			t.Fatalf("tuple of %d fields: %s", len(r), r)
		}
		var x viewTuple
		var idx [6]int
		var indent int
		for k, dst := range []any{&x.Ms, &idx[0], &idx[1], &idx[2], &x.Link, &idx[3], &idx[4], &idx[5], &x.Pair, &indent, &x.Body} {
			if err := json.Unmarshal(r[k], dst); err != nil {
				t.Fatalf("field %d of %s: %v", k, r, err)
			}
		}
		for k, dst := range []*string{&x.Kind, &x.Hop, &x.Dir, &x.Session, &x.Method, &x.Label} {
			if idx[k] < 0 || idx[k] >= len(strs) {
				t.Fatalf("string %d of %d", idx[k], len(strs))
			}
			*dst = strs[idx[k]]
		}
		x.Indent = indent == 1
		out = append(out, x)
	}
	return out
}

// The page has a tuple per record, a response names its request (per hop
// and link: the same id on the other hop is another request) and inherits
// its method and session for the filters, and message text cannot break
// out of the page.
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
	got := viewTuples(t, page, false)
	if len(got) != len(recs) {
		t.Fatalf("%d records in the page, want %d", len(got), len(recs))
	}
	for i, x := range got {
		if x.Kind != recs[i].Kind || x.Hop != recs[i].Hop || x.Dir != recs[i].Dir || x.Link != recs[i].Link {
			t.Errorf("record %d: %+v", i, x)
		}
	}
	if got[2].Label != "cancel-grace" {
		t.Errorf("note labelled %q", got[2].Label)
	}
	// A response names its request; the page's script tells the request.
	for i, want := range []int{-1, -1, -1, 1, 0} {
		if got[i].Pair != want {
			t.Errorf("record %d paired with %d, want %d", i, got[i].Pair, want)
		}
	}
	if got[4].Session != "s-1" || got[4].Method != "session/prompt" {
		t.Errorf("the editor's answer has session %q and method %q, not its request's", got[4].Session, got[4].Method)
	}
	if !got[0].Indent || got[0].Body != string(recs[0].Msg) {
		t.Errorf("record 0's body is %q (indent %v), want the message", got[0].Body, got[0].Indent)
	}
	if strings.Contains(page, "<script>alert(1)") || strings.Count(page, "</script>") != 3 {
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

// A message's text is a JSON string in the page's data, which the
// page's script parses: it must come back exactly, whatever the message
// holds, and hold nothing that ends the script or starts markup.
func TestView_PanelTextRoundTrips(t *testing.T) {
	msg := `{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"</script><!-- \u2028 & ' \" \\ é 😀 ` + "\u2028\u2029" + ` </SCRIPT >"}}`
	r := Record{Hop: "editor", Dir: "in"}
	Classify(&r, []byte(msg))
	raw := Record{Hop: "agent", Dir: "in", Kind: KindFrame, Raw: "not json </script><b>x\x00\xff\u2028"}
	var page bytes.Buffer
	if err := WriteHTML(&page, "t", []Record{r, raw}); err != nil {
		t.Fatal(err)
	}
	m, ok := scriptBlock(page.String(), "records")
	if !ok {
		t.Fatalf("no records in the page")
	}
	if strings.ContainsAny(m, "<>&\u2028\u2029") {
		t.Errorf("the page's data holds <, >, & or a line separator: %s", m)
	}
	got := viewTuples(t, page.String(), false)
	if got[0].Body != msg || !got[0].Indent {
		t.Errorf("body = %q, want %q", got[0].Body, msg)
	}
	if want := strings.ToValidUTF8(raw.Raw, "\ufffd"); got[1].Body != want || got[1].Indent {
		t.Errorf("raw body = %q, want %q", got[1].Body, want)
	}
	for _, s := range []string{msg, raw.Raw, "\x01\x1f\"\\\t\n"} {
		var back string
		if err := json.Unmarshal(appendScriptString(nil, s), &back); err != nil || back != strings.ToValidUTF8(s, "\ufffd") {
			t.Errorf("appendScriptString(%q) decodes to %q, %v", s, back, err)
		}
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
		// A rule profile's frames are named by the rule that took them.
		mk("in", 1_237_000_000, `{"op":"progress","job":1,"text":"x"}`),
		mk("in", 1_238_000_000, `{"op":"huh"}`), // no rule took it
		mk("in", 1_239_000_000, `{"jsonrpc":"2.0","method":"agent/update","params":{}}`),
	}
	recs[5].Rule, recs[7].Rule = "progress", "token"
	var buf bytes.Buffer
	if err := WriteHTML(&buf, "t", recs); err != nil {
		t.Fatal(err)
	}
	got := viewTuples(t, buf.String(), false)
	for i, want := range []string{
		"session/prompt #7",
		"session/update tool_call",
		"session/update agent_message_text",
		"result #7 · 1234 ms",
		"result #99",
		"progress",
		"frame",
		"agent/update · token",
	} {
		if got[i].Label != want {
			t.Errorf("record %d labelled %q, want %q", i, got[i].Label, want)
		}
	}
}

// A long trace is one page: 50,000 short updates make a page of about
// 250 bytes a record (a view of one HTML row per record was 1,300), the
// request at the start paired with its answer at the end.
func TestWriteViewFile_OnePage(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "big.trace")
	const n = 50000
	if err := os.WriteFile(in, updatesTrace(n), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "big.html")
	got, err := WriteViewFile(in, out)
	if err != nil || got != n {
		t.Fatalf("WriteViewFile = %d, %v", got, err)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if size := len(page); size > 15<<20 {
		t.Errorf("the page of %d updates is %d bytes", n, size)
	}
	if m, _ := scriptBlock(string(page), "records"); strings.Count(m, "\n[") != n {
		t.Errorf("%d records in the page, want %d", strings.Count(m, "\n["), n)
	}
	if last := viewTuples(t, string(page), true)[0]; last.Pair != 0 || !strings.HasPrefix(last.Label, "result #1 · ") {
		t.Errorf("the last record is %+v, want the answer to record 0", last)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "big-*.html")); len(matches) > 0 {
		t.Errorf("more pages: %v", matches)
	}
}

// updatesTrace is a trace of a prompt, n-2 short updates and the answer.
func updatesTrace(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"t_ns":0,"time":"2026-01-01T00:00:00Z","hop":"editor","dir":"in","kind":"request","method":"session/prompt","id":1,"session":"s","msg":{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}}` + "\n")
	for i := 1; i < n-1; i++ {
		fmt.Fprintf(&b, `{"t_ns":%d,"time":"2026-01-01T00:00:00Z","hop":"editor","dir":"out","kind":"notification","method":"session/update","session":"s","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d of the model's answer"}}}}}`+"\n", i*1000, i)
	}
	fmt.Fprintf(&b, `{"t_ns":%d,"time":"2026-01-01T00:00:00Z","hop":"editor","dir":"out","kind":"response","id":1,"msg":{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}}`+"\n", n*1000)
	return b.Bytes()
}

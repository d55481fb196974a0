// Package translatetest runs golden transcripts against translators, the way
// net/http/httptest and testing/fstest support tests of handlers and file
// systems. It is test support: only _test.go files import it, so unlike the
// dialect packages it may read and write files. It also checks promises a
// translator makes the engine over random histories (CheckPasses: the
// translate.UpdatePasser promise).
//
// # Transcript files
//
// A golden transcript is a txtar archive (golang.org/x/tools/txtar), one
// scenario per file, conventionally translate/<dialect>/testdata/*.txtar.
//
// The archive comment (header) is prose: the scenario, the captured frames it
// comes from (docs/agent-protocols.md#…), the bug it pins. One header line has a
// meaning to the runner:
//
//	pending: <editor id> [<editor id>…]
//
// names editor requests (by their raw JSON ids, e.g. 3 or "abc") that are
// meant to be still unanswered when the transcript ends. Another,
//
//	cancel-grace: <duration>
//
// is the engine's cancel grace the runner gives session/cancel and
// CancelRequest inputs (translate.Msg.Grace); 5s, the engine's default,
// without it.
//
// Sections:
//
//	-- options.hcl --   optional: the dialect's options block, passed to Configure
//	                    (without it Configure gets a nil body)
//	-- transcript --    required: the conversation, one message per line
//
// Transcript lines, each "<marker> <payload>":
//
//	editor> <JSON-RPC message>    input from the editor (see Driver.Editor)
//	agent> <frame>                input from the agent, fed to FromAgent byte for byte
//	event> abandon <editor id>    the engine's Abandon input for that request
//	event> cancel-request <id>    the engine's CancelRequest input for that request
//	event> link-up                the engine's LinkUp input
//	event> link-down <reason>     the engine's LinkDown input
//	event> tick <duration>        a Tick input whose At is that long after the
//	                              transcript began (every input before the first
//	                              tick has At = Epoch; later ones the last tick's)
//	>editor <JSON-RPC message>    expected output to the editor, compared as JSON
//	>editor= <JSON-RPC message>   the same, compared byte for byte
//	>agent <frame>                expected frame to the agent, compared as JSON
//	>agent= <frame>               the same, compared byte for byte
//	>error <text>                 expected error returned by the call, compared as text
//	>note <repair> <detail>       expected Note output, compared as text
//	>timer <duration>             expected Timer output, compared as text
//
// Blank lines and lines starting with # are comments. Expected lines follow
// the input that produced them, in output order; an input with no expected
// lines must produce no output.
//
// Outputs toward the editor are rendered as the engine writes them: Reply as
// {"jsonrpc":"2.0","id":<the editor's raw id>,"result":…}, Fail likewise with
// "error", Notify as a notification, Call as a request whose id is the
// translator's Ref (so the transcript's editor answers it with that id), and
// CancelCall as a $/cancel_request naming that Ref. Editor requests get Refs
// 1, 2, 3… in order; session/new requests carry Msg.Session "sess-1",
// "sess-2"… (one per session/new) when the dialect is PerSession, as the
// engine mints them; an editor $/cancel_request naming a pending request is
// fed as CancelRequest, as the engine does. A translator's returned error is
// rendered as a >error line after its outputs; for an editor request the
// engine then answers -32603 itself, so the runner counts the request as
// answered. JSON is compared
// structurally: key order and whitespace do not matter, numbers compare by
// their literal text.
//
// With -update (go test ./translate/... -update) the runner rewrites the
// expected lines that do not match from the actual outputs and leaves inputs,
// comments, matching lines, the header and the other sections alone. A
// rewritten expected line keeps the byte-exact marker (=) of the line it
// replaces at the same position.
//
// # Invariants
//
// On every run the runner also checks what the engine relies on: every editor
// request is answered exactly once (Reply or Fail) unless it was abandoned or
// is listed in pending:, no answer names a Ref the editor never sent or that
// was abandoned, Call Refs are unique among outstanding calls, CancelCall names
// an outstanding call, every output is one line of valid JSON, every Fail body
// has an integer code and a string message, and every session/update carries
// sessionId and update.sessionUpdate.
package translatetest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/acp-bridge/acp-bridge/translate"
)

// The -update flag is defined once per test binary: here, unless a package
// initialized earlier already defined it (translate's own tests do, so that
// go test ./translate/... -update works for every package). Packages that
// import translatetest must not define it themselves.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the expected lines of golden transcripts")
	}
}

// updating reports whether -update was given.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Section names in a transcript archive.
const (
	sectionOptions    = "options.hcl"
	sectionTranscript = "transcript"
)

// Run runs every transcript file matching pattern (a filepath.Glob pattern,
// e.g. "testdata/*.txtar") as a subtest named after the file, against a fresh
// translator of d per file. It fails t when no file matches.
func Run(t *testing.T, d translate.Dialect, pattern string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatalf("translatetest: %v", err)
	}
	if len(files) == 0 {
		t.Fatalf("translatetest: no transcript matches %q", pattern)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			res := check(d, file, data)
			for _, p := range res.problems {
				t.Error(p)
			}
			if updating() {
				if res.rewritten != nil && !bytes.Equal(res.rewritten, data) {
					if err := os.WriteFile(file, res.rewritten, 0o666); err != nil {
						t.Fatal(err)
					}
					t.Logf("updated %s", file)
				}
				return
			}
			for _, m := range res.mismatches {
				t.Error(m)
			}
		})
	}
}

// result is the outcome of one transcript.
type result struct {
	problems   []string // syntax errors and invariant violations
	mismatches []string // expected vs actual differences
	rewritten  []byte   // the file with expected lines replaced; nil if unparsable
}

// tline is one line of the transcript section.
type tline struct {
	no      int    // line number in the file
	text    string // the whole line
	marker  string // first word; "" for comments and blank lines
	payload string
}

func (l tline) isInput() bool {
	return l.marker == "editor>" || l.marker == "agent>" || l.marker == "event>"
}

func (l tline) isExpected() bool {
	switch l.marker {
	case ToEditor, ToEditor + "=", ToAgent, ToAgent + "=", GotError, GotNote, GotTimer:
		return true
	}
	return false
}

// check runs one transcript file.
func check(d translate.Dialect, name string, data []byte) result {
	var res result
	ar := txtar.Parse(data)
	var options, transcript *txtar.File
	firstLine := 1 + bytes.Count(ar.Comment, []byte("\n"))
	transcriptLine := 0
	for i := range ar.Files {
		f := &ar.Files[i]
		switch f.Name {
		case sectionOptions:
			options = f
		case sectionTranscript:
			transcript = f
			transcriptLine = firstLine + 1
		default:
			res.problems = append(res.problems, fmt.Sprintf("%s: unknown section %q (want %q or %q)", name, f.Name, sectionOptions, sectionTranscript))
		}
		if transcript == nil {
			firstLine += 1 + bytes.Count(f.Data, []byte("\n"))
		}
	}
	if transcript == nil {
		res.problems = append(res.problems, fmt.Sprintf("%s: no -- %s -- section", name, sectionTranscript))
		return res
	}
	var pending []string
	var grace time.Duration
	for _, l := range strings.Split(string(ar.Comment), "\n") {
		if rest, ok := strings.CutPrefix(l, "pending:"); ok {
			pending = append(pending, strings.Fields(strings.ReplaceAll(rest, ",", " "))...)
		}
		if rest, ok := strings.CutPrefix(l, "cancel-grace:"); ok {
			d, err := time.ParseDuration(strings.TrimSpace(rest))
			if err != nil || d <= 0 {
				res.problems = append(res.problems, fmt.Sprintf("%s: cancel-grace: %q is not a positive duration", name, strings.TrimSpace(rest)))
				return res
			}
			grace = d
		}
	}

	var optionSrc []byte
	if options != nil {
		optionSrc = options.Data
	}
	dr, err := NewDriver(d, optionSrc, name+":"+sectionOptions)
	if err != nil {
		res.problems = append(res.problems, fmt.Sprintf("%s: %v", name, err))
		return res
	}
	if grace > 0 {
		dr.CancelGrace = grace
	}

	var lines []tline
	for i, text := range strings.Split(strings.TrimSuffix(string(transcript.Data), "\n"), "\n") {
		l := tline{no: transcriptLine + i, text: text}
		if text != "" && !strings.HasPrefix(text, "#") {
			l.marker, l.payload, _ = strings.Cut(text, " ")
			if !l.isInput() && !l.isExpected() {
				res.problems = append(res.problems, fmt.Sprintf("%s:%d: unknown line marker %q", name, l.no, l.marker))
				return res
			}
		}
		lines = append(lines, l)
	}

	var out []string // the rewritten transcript lines
	for i := 0; i < len(lines); {
		l := lines[i]
		if !l.isInput() {
			if l.isExpected() {
				res.problems = append(res.problems, fmt.Sprintf("%s:%d: expected output before any input", name, l.no))
				return res
			}
			out = append(out, l.text)
			i++
			continue
		}
		// One step: the input and everything up to the next input.
		j := i + 1
		for j < len(lines) && !lines[j].isInput() {
			j++
		}
		step := lines[i+1 : j]
		dr.SetWhere(fmt.Sprintf("%s:%d", name, l.no))
		actual, err := dr.Feed(l.text)
		if err != nil {
			res.problems = append(res.problems, fmt.Sprintf("%s:%d: %v", name, l.no, err))
			return res
		}
		var expected []tline
		for _, e := range step {
			if e.isExpected() {
				expected = append(expected, e)
			}
		}
		if diff := compare(expected, actual); diff != "" {
			res.mismatches = append(res.mismatches, fmt.Sprintf("%s:%d: after %s\n%s", name, l.no, l.text, diff))
		}
		out = append(out, l.text)
		out = append(out, rewriteStep(step, actual)...)
		i = j
	}
	dr.SetWhere(name)
	dr.Finish(pending)
	res.problems = append(res.problems, dr.Problems()...)

	transcript.Data = []byte(strings.Join(out, "\n") + "\n")
	res.rewritten = txtar.Format(ar)
	return res
}

// rewriteStep returns the non-input lines of a step with its expected lines
// replaced by actual: comments stay where they were, the i-th actual output
// takes the place of the i-th expected line (which is kept as written when it
// already matches, and otherwise keeps its = marker when the direction
// matches), and extra outputs follow the last expected line.
func rewriteStep(step []tline, actual []Output) []string {
	var out []string
	k := 0
	lastExpected := -1
	for i, l := range step {
		if l.isExpected() {
			lastExpected = i
		}
	}
	for i, l := range step {
		if !l.isExpected() {
			out = append(out, l.text)
		} else if k < len(actual) && lineMatches(l, actual[k]) {
			// Already right: keep the line as written (key order, spacing).
			out = append(out, l.text)
			k++
		} else if k < len(actual) {
			a := actual[k]
			marker := a.Marker
			if strings.TrimSuffix(l.marker, "=") == a.Marker && strings.HasSuffix(l.marker, "=") {
				marker += "="
			}
			out = append(out, marker+" "+a.Text)
			k++
		}
		if i == lastExpected {
			for ; k < len(actual); k++ {
				out = append(out, actual[k].Marker+" "+actual[k].Text)
			}
		}
	}
	if lastExpected < 0 {
		// No expected lines: outputs go right after the input, before any
		// trailing comments of the step.
		var head []string
		for ; k < len(actual); k++ {
			head = append(head, actual[k].Marker+" "+actual[k].Text)
		}
		out = append(head, out...)
	}
	return out
}

// compare reports the differences between the expected lines of a step and
// the actual outputs, or "" when they match.
func compare(expected []tline, actual []Output) string {
	var b strings.Builder
	n := max(len(expected), len(actual))
	for i := range n {
		switch {
		case i >= len(expected):
			fmt.Fprintf(&b, "\tunexpected: %s %s\n", actual[i].Marker, actual[i].Text)
		case i >= len(actual):
			fmt.Fprintf(&b, "\tmissing (line %d): %s\n", expected[i].no, expected[i].text)
		default:
			if !lineMatches(expected[i], actual[i]) {
				fmt.Fprintf(&b, "\tline %d\n\t\twant: %s\n\t\tgot:  %s %s\n", expected[i].no, expected[i].text, actual[i].Marker, actual[i].Text)
			}
		}
	}
	return b.String()
}

func lineMatches(e tline, a Output) bool {
	exact := strings.HasSuffix(e.marker, "=")
	if strings.TrimSuffix(e.marker, "=") != a.Marker {
		return false
	}
	if exact || a.Marker == GotError || a.Marker == GotNote || a.Marker == GotTimer {
		return e.payload == a.Text
	}
	return JSONEqual([]byte(e.payload), []byte(a.Text))
}

// JSONEqual reports whether a and b hold the same JSON value, ignoring key
// order and whitespace; numbers compare by their literal text. Two texts that
// are not both valid JSON are equal only when identical.
func JSONEqual(a, b []byte) bool {
	va, erra := decodeJSON(a)
	vb, errb := decodeJSON(b)
	if erra != nil || errb != nil {
		return erra != nil && errb != nil && bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// AgentLines returns the payload of every "agent>" line in the transcripts
// matching pattern, in file order: the seed corpus of a dialect's FromAgent
// fuzz target.
func AgentLines(pattern string) ([][]byte, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for _, f := range txtar.Parse(data).Files {
			if f.Name != sectionTranscript {
				continue
			}
			for _, l := range strings.Split(string(f.Data), "\n") {
				if p, ok := strings.CutPrefix(l, "agent> "); ok {
					frames = append(frames, []byte(p))
				}
			}
		}
	}
	return frames, nil
}

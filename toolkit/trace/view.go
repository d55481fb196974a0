package trace

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

//go:embed view.html
var viewHTML string

// viewTmpl is parsed on first use, not at every start of the binary.
var viewTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("view").Parse(viewHTML))
})

// The JSON panel shows each message indented, within these caps: values
// nested deeper than ViewMaxDepth are elided, and so is whatever passes
// ViewMaxBytes of the indented text. Without them a deeply nested message
// makes a page quadratic in its depth (every line indented by it).
const (
	ViewMaxDepth = 64
	ViewMaxBytes = 1 << 20
)

// The page's records are one JSON array of tuples, a tuple per record:
//
//	[ms, kind, hop, dir, link, session, method, label, pair, indent, body]
//
// kind, hop, dir, session, method and label index the page's table of
// strings (most repeat from record to record); pair is, for a response,
// the index of its request and -1 otherwise; body is the text of the JSON
// panel, which the page indents first when indent is 1 (a valid message
// within ViewMaxDepth: the page indents it as json.Indent would) and shows
// as it is when 0 (raw text, a note, or a message Go has indented and
// cut at the caps).

type viewHead struct {
	Title string
}

type viewTail struct {
	Sessions []string
	Methods  []string
	Stats    string
	MaxBytes int
}

// A View writes a trace as one self-contained HTML page (inline CSS and
// script, no network): a sequence diagram with editor, bridge and agent
// lanes, one arrow per message, notes on the bridge lane, a JSON panel for
// the clicked arrow, and filters by session and method. The records go
// into the page as data and the page draws only the rows in view, so that
// a trace of 50,000 messages is one page that loads in seconds. The View
// writes each record as it is added, holding one message at a time; what
// it keeps is the index of unanswered requests, the table of strings and
// the filters' values.
type View struct {
	w        *bufio.Writer
	n        int
	arrows   int
	notes    int
	open     map[openKey]openReq
	sessions []string
	methods  []string
	seen     map[string]bool // "s"+session, "m"+method: in the lists
	strs     map[string]int
	strList  []string
	pretty   bytes.Buffer
	line     []byte // the tuple being written
	// protocols are the ACP versions the initialize answers negotiated,
	// one text per hop and link (view_protocol.go).
	protocols []string
}

type openKey struct {
	hop  string
	link int
	dir  string
	id   string
}

type openReq struct {
	i               int
	method, session string
	tns             int64
}

// NewView writes the page's head to w and returns the View to add records to.
func NewView(w io.Writer, title string) (*View, error) {
	v := &View{w: bufio.NewWriter(w), open: map[openKey]openReq{}, seen: map[string]bool{}, strs: map[string]int{}}
	if err := viewTmpl().ExecuteTemplate(v.w, "head", viewHead{Title: title}); err != nil {
		return nil, err
	}
	_, err := v.w.WriteString(`<script type="application/json" id="records">[`)
	return v, err
}

// Add writes r's tuple.
func (v *View) Add(r Record) error {
	i := v.n
	v.n++
	session, method, pair := r.Session, r.Method, -1
	var lbl string
	if r.Kind == KindNote {
		lbl = r.Note
		v.notes++
	} else {
		v.arrows++
		lbl = label(r)
		switch r.Kind {
		case KindRequest:
			v.open[openKey{r.Hop, r.Link, r.Dir, string(r.ID)}] = openReq{i, r.Method, r.Session, r.TNs}
		case KindResponse, KindError:
			other := "in"
			if r.Dir == "in" {
				other = "out"
			}
			k := openKey{r.Hop, r.Link, other, string(r.ID)}
			if req, ok := v.open[k]; ok && len(r.ID) > 0 {
				delete(v.open, k)
				pair = req.i
				method = req.method
				if req.method == "initialize" && r.Kind == KindResponse {
					lbl += v.noteProtocol(r)
				}
				// The request→response latency, on the response's arrow.
				lbl += " · " + latency(r.TNs-req.tns)
				if session == "" {
					session = req.session
				}
			}
		}
	}
	if session != "" && !v.seen["s"+session] {
		v.seen["s"+session] = true
		v.sessions = append(v.sessions, session)
	}
	if r.Method != "" && !v.seen["m"+r.Method] {
		v.seen["m"+r.Method] = true
		v.methods = append(v.methods, r.Method)
	}

	b := v.line[:0]
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, '\n', '[')
	b = strconv.AppendFloat(b, float64(r.TNs)/1e6, 'f', 3, 64)
	for _, s := range []string{r.Kind, r.Hop, r.Dir} {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(v.intern(s)), 10)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(r.Link), 10)
	for _, s := range []string{session, method, lbl} {
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(v.intern(s)), 10)
	}
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(pair), 10)
	body, pageIndents := v.bodyOf(r)
	if pageIndents {
		b = append(b, ",1,"...)
	} else {
		b = append(b, ",0,"...)
	}
	b = appendScriptString(b, body)
	b = append(b, ']')
	v.line = b[:0]
	_, err := v.w.Write(b)
	return err
}

// intern returns s's index in the page's table of strings.
func (v *View) intern(s string) int {
	k, ok := v.strs[s]
	if !ok {
		k = len(v.strList)
		v.strs[s] = k
		v.strList = append(v.strList, s)
	}
	return k
}

// Close writes the page's end and flushes it.
func (v *View) Close() error {
	b := append(v.line[:0], "]</script>\n<script type=\"application/json\" id=\"strings\">["...)
	for k, s := range v.strList {
		if k > 0 {
			b = append(b, ',')
		}
		b = appendScriptString(b, s)
	}
	b = append(b, "]</script>\n"...)
	if _, err := v.w.Write(b); err != nil {
		return err
	}
	slices.Sort(v.methods)
	stats := fmt.Sprintf("%d messages, %d notes", v.arrows, v.notes)
	if len(v.protocols) > 0 {
		stats += "; " + strings.Join(v.protocols, "; ")
	}
	tail := viewTail{Sessions: v.sessions, Methods: v.methods, MaxBytes: ViewMaxBytes, Stats: stats}
	if err := viewTmpl().ExecuteTemplate(v.w, "tail", tail); err != nil {
		return err
	}
	return v.w.Flush()
}

// appendScriptString appends s to b as a JSON string that can sit in a
// <script type="application/json"> block whatever s holds: encoding/json
// escapes <, > and & (no "</script" nor "<!--" can end or change the
// block) and U+2028/U+2029, and writes invalid UTF-8 as U+FFFD. (The
// module's own appender, wire.AppendString, leaves <, > and & as they are:
// nothing else it writes is read as HTML.)
func appendScriptString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// WriteHTML writes recs as one page: see View.
func WriteHTML(w io.Writer, title string, recs []Record) error {
	v, err := NewView(w, title)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := v.Add(r); err != nil {
			return err
		}
	}
	return v.Close()
}

// latency renders a request→response time for an arrow.
func latency(ns int64) string {
	ms := float64(max(ns, 0)) / 1e6
	switch {
	case ms < 10:
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	case ms < 10000:
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
}

// label is the text on an arrow: a session/update names its kind, as
// every notification arrow would otherwise read the same, and an agent
// frame the rule of the dialect that handled it (a rule profile's event
// name), as every plain JSON frame would otherwise read "frame".
func label(r Record) string {
	l := kindLabel(r)
	switch {
	case r.Rule == "":
		return l
	case r.Kind == KindFrame:
		return r.Rule
	}
	return l + " · " + r.Rule
}

func kindLabel(r Record) string {
	id := ""
	if len(r.ID) > 0 {
		id = " #" + string(r.ID)
	}
	switch r.Kind {
	case KindNotification:
		if r.Method == "session/update" {
			u := gjson.GetBytes(r.Msg, "params.update")
			kind := u.Get("sessionUpdate").Str
			if kind == "" {
				kind = u.Get("@type").Str
			}
			if kind != "" {
				return r.Method + " " + kind
			}
		}
		return r.Method + id
	case KindRequest:
		return r.Method + id
	case KindResponse:
		return "result" + id
	case KindError:
		return fmt.Sprintf("error %s%s", gjson.GetBytes(r.Msg, "error.code").Raw, id)
	}
	if r.Method != "" {
		return r.Method
	}
	return r.Kind
}

// bodyOf is what the JSON panel shows for r, and whether the page is to
// indent it: a valid message within ViewMaxDepth as it is (the page
// indents it, which is cheaper to send than the indented text); a deeper
// one indented here, as json.Indent would (its numbers and strings
// byte-exact) within the caps; the raw text; or the note record.
func (v *View) bodyOf(r Record) (body string, pageIndents bool) {
	buf := &v.pretty
	buf.Reset()
	switch {
	case len(r.Msg) > 0:
		if !json.Valid(r.Msg) {
			return capText(string(r.Msg)), false
		}
		if _, levels := valueEnd(r.Msg, skipSpace(r.Msg, 0)); levels <= ViewMaxDepth {
			return string(r.Msg), true
		}
		indent(buf, r.Msg, ViewMaxDepth, ViewMaxBytes)
		return buf.String(), false
	case r.Kind != KindNote:
		return capText(r.Raw), false
	}
	r.Msg, r.Raw = nil, ""
	b, _ := json.MarshalIndent(r, "", "  ")
	return capText(string(b)), false
}

// capText cuts s at ViewMaxBytes with a marker saying how much is elided.
func capText(s string) string {
	if len(s) <= ViewMaxBytes {
		return s
	}
	cut := ViewMaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… %d more bytes elided", len(s)-cut)
}

// indent writes the valid JSON src to dst indented by two spaces, as
// json.Indent does, in one pass: a value nested deeper than maxDepth is
// written as a marker, and past maxBytes the rest is elided with one.
func indent(dst *bytes.Buffer, src []byte, maxDepth, maxBytes int) {
	depth := 0
	newline := func(d int) {
		dst.WriteByte('\n')
		for range d {
			dst.WriteString("  ")
		}
	}
	capped := func() bool {
		if dst.Len() <= maxBytes {
			return false
		}
		b := dst.Bytes()
		cut := maxBytes
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		dst.Truncate(cut)
		fmt.Fprintf(dst, "\n… elided: the view of a message stops at %d bytes", maxBytes)
		return true
	}
	defer capped()
	for i := 0; i < len(src); i++ {
		if capped() {
			return
		}
		switch c := src[i]; c {
		case ' ', '\t', '\n', '\r':
		case '"':
			end := stringEnd(src, i)
			dst.Write(src[i:end])
			i = end - 1
		case '{', '[':
			if depth == maxDepth {
				end, levels := valueEnd(src, i)
				fmt.Fprintf(dst, "%c… %d more levels, %d bytes elided %c", c, levels, end-i, c+2)
				i = end - 1
				continue
			}
			dst.WriteByte(c)
			j := skipSpace(src, i+1)
			if j < len(src) && (src[j] == '}' || src[j] == ']') {
				dst.WriteByte(src[j])
				i = j
				continue
			}
			depth++
			newline(depth)
		case '}', ']':
			depth--
			newline(depth)
			dst.WriteByte(c)
		case ',':
			dst.WriteByte(c)
			newline(depth)
		case ':':
			dst.WriteString(": ")
		default:
			dst.WriteByte(c)
		}
	}
}

func skipSpace(src []byte, i int) int {
	for i < len(src) && (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' || src[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at src[i].
func stringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(src)
}

// valueEnd returns the index after the object or array that starts at
// src[i], and how deep it nests.
func valueEnd(src []byte, i int) (end, levels int) {
	depth := 0
	for j := i; j < len(src); j++ {
		switch src[j] {
		case '"':
			j = stringEnd(src, j) - 1
		case '{', '[':
			depth++
			levels = max(levels, depth)
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, levels
			}
		}
	}
	return len(src), levels
}

// WriteViewFile writes the trace at in as a page at out, one record at a
// time, and returns how many records it read. The page holds every
// message of the trace, so it gets the trace's permissions; out is never
// a symbolic link followed.
func WriteViewFile(in, out string) (int, error) {
	src, err := os.Open(in)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return 0, err
	}
	perm := st.Mode().Perm()
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, perm)
	if err != nil {
		if isLoop(err) {
			return 0, fmt.Errorf("%s is a symbolic link; name the page's file itself", out)
		}
		return 0, err
	}
	// An existing file keeps its mode through O_CREATE: set the trace's.
	err = f.Chmod(perm)
	n := 0
	if err == nil {
		n, err = copyView(NewReader(src), f, filepath.Base(in))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return 0, err
	}
	return n, nil
}

func copyView(r *Reader, w io.Writer, title string) (int, error) {
	v, err := NewView(w, title)
	if err != nil {
		return 0, err
	}
	n := 0
	for ; ; n++ {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		if err := v.Add(rec); err != nil {
			return n, err
		}
	}
	return n, v.Close()
}

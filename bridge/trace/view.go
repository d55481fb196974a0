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
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

//go:embed view.html
var viewHTML string

var viewTmpl = template.Must(template.New("view").Parse(viewHTML))

// The JSON panel shows each message indented, within these caps: values
// nested deeper than ViewMaxDepth are elided, and so is whatever passes
// ViewMaxBytes of the indented text. Without them a deeply nested message
// makes a page quadratic in its depth (every line indented by it).
const (
	ViewMaxDepth = 64
	ViewMaxBytes = 1 << 20
)

// viewRow is one record as the view draws it.
type viewRow struct {
	I       int
	Note    bool
	Kind    string
	Hop     string
	Dir     string
	Link    int
	Session string
	Method  string
	Label   string
	// Side is "editor" or "agent": which half of the diagram the arrow
	// spans; Right says it points toward the agent.
	Side  string
	Right bool
	// Pair is, for a response, the index of its request; -1 otherwise
	// (the page's script pairs the request with its response).
	Pair   int
	Ms     string
	Pretty string
}

type viewHead struct {
	Title string
	// Page counts a paged view's pages from 1 (0: not paged); Prev is the
	// previous page's file name.
	Page int
	Prev string
}

type viewTail struct {
	Sessions []string
	Methods  []string
	Stats    string
	Next     string // the next page's file name
}

// ViewPageSize is how many records a page of WriteViewFile holds: one
// page of 50,000 messages was 67 MB and took a browser a minute to load;
// 5,000 took 3.4 s, so a page holds fewer than that.
const ViewPageSize = 2000

// A View writes a trace as one self-contained HTML page (inline CSS and
// script, no network): a sequence diagram with editor, bridge and agent
// lanes, one arrow per message, notes on the bridge lane, a JSON panel for
// the clicked arrow, and filters by session and method. It writes each
// record as it is added, so that it holds one message at a time; what it
// keeps is the index of unanswered requests and the filters' values.
type View struct {
	w        *bufio.Writer
	n        int
	arrows   int
	notes    int
	open     map[openKey]openReq
	sessions []string
	methods  []string
	seen     map[string]bool // "s"+session, "m"+method: in the lists
	pretty   bytes.Buffer
	title    string
	page     int
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
	v := &View{w: bufio.NewWriter(w), open: map[openKey]openReq{}, seen: map[string]bool{}, title: title}
	return v, viewTmpl.ExecuteTemplate(v.w, "head", viewHead{Title: title})
}

// NextPage ends the page being written with a link to the next one, named
// next, and starts that page on w with a link back to prev. Record
// numbers and the pairing of requests with their responses go on across
// pages; the filters and counts are the page's own.
func (v *View) NextPage(next string, w io.Writer, prev string) error {
	if err := v.closePage(next); err != nil {
		return err
	}
	if v.page == 0 {
		v.page = 1
	}
	v.page++
	v.w = bufio.NewWriter(w)
	v.arrows, v.notes, v.sessions, v.methods, v.seen = 0, 0, nil, nil, map[string]bool{}
	return viewTmpl.ExecuteTemplate(v.w, "head", viewHead{Title: v.title, Page: v.page, Prev: prev})
}

// Add writes r's row.
func (v *View) Add(r Record) error {
	i := v.n
	v.n++
	row := viewRow{I: i, Kind: r.Kind, Hop: r.Hop, Dir: r.Dir, Link: r.Link, Session: r.Session,
		Method: r.Method, Pair: -1, Ms: strconv.FormatFloat(float64(r.TNs)/1e6, 'f', 3, 64)}
	row.Pretty = v.prettyOf(r)
	if r.Kind == KindNote {
		row.Note = true
		row.Label = r.Note
		v.notes++
	} else {
		v.arrows++
		row.Side = r.Hop
		// Toward the agent: the editor's messages in, the bridge's
		// messages out to the agent.
		row.Right = (r.Hop == "editor") == (r.Dir == "in")
		row.Label = label(r)
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
				row.Pair = req.i
				row.Method = req.method
				// The request→response latency, on the response's arrow.
				row.Label += " · " + latency(r.TNs-req.tns)
				if row.Session == "" {
					row.Session = req.session
				}
				if req.method == "initialize" && r.Kind == KindResponse {
					row.Label += v.noteProtocol(r)
				}
			}
		}
	}
	if row.Session != "" && !v.seen["s"+row.Session] {
		v.seen["s"+row.Session] = true
		v.sessions = append(v.sessions, row.Session)
	}
	if r.Method != "" && !v.seen["m"+r.Method] {
		v.seen["m"+r.Method] = true
		v.methods = append(v.methods, r.Method)
	}
	return viewTmpl.ExecuteTemplate(v.w, "row", row)
}

// Close writes the page's end and flushes it.
func (v *View) Close() error { return v.closePage("") }

func (v *View) closePage(next string) error {
	slices.Sort(v.methods)
	stats := fmt.Sprintf("%d messages, %d notes", v.arrows, v.notes)
	if len(v.protocols) > 0 {
		stats += "; " + strings.Join(v.protocols, "; ")
	}
	if v.page > 0 || next != "" {
		stats = fmt.Sprintf("page %d: %s (records #%d to #%d)", max(v.page, 1), stats, v.n-v.arrows-v.notes, v.n-1)
	}
	tail := viewTail{Sessions: v.sessions, Methods: v.methods, Stats: stats, Next: next}
	if err := viewTmpl.ExecuteTemplate(v.w, "tail", tail); err != nil {
		return err
	}
	return v.w.Flush()
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
// every notification arrow would otherwise read the same.
func label(r Record) string {
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

// prettyOf is what the JSON panel shows for r: the message indented as
// json.Indent would (its numbers and strings byte-exact) within the caps,
// the raw text, or the note record.
func (v *View) prettyOf(r Record) string {
	buf := &v.pretty
	buf.Reset()
	switch {
	case len(r.Msg) > 0:
		if !json.Valid(r.Msg) {
			return capText(string(r.Msg))
		}
		indent(buf, r.Msg, ViewMaxDepth, ViewMaxBytes)
		return buf.String()
	case r.Kind != KindNote:
		return capText(r.Raw)
	}
	r.Msg, r.Raw = nil, ""
	b, _ := json.MarshalIndent(r, "", "  ")
	return capText(string(b))
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
// time, and returns how many records it read. Past ViewPageSize records
// it goes on in OUT-2.html, OUT-3.html…, each page linking to the next
// and back. The pages hold every message of the trace, so they get the
// trace's permissions; out is never a symbolic link followed.
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
	var files []*os.File
	create := func(name string) (*os.File, error) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, perm)
		if err != nil {
			if isLoop(err) {
				return nil, fmt.Errorf("%s is a symbolic link; name the page's file itself", name)
			}
			return nil, err
		}
		files = append(files, f)
		// An existing file keeps its mode through O_CREATE: set the trace's.
		return f, f.Chmod(perm)
	}
	n, err := copyView(NewReader(src), out, filepath.Base(in), create)
	for _, f := range files {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		for _, f := range files {
			os.Remove(f.Name())
		}
		return 0, err
	}
	return n, nil
}

// PageName is the file name of page k (from 1) of a view written to out.
func PageName(out string, k int) string {
	if k <= 1 {
		return out
	}
	base := strings.TrimSuffix(out, ".html")
	return base + "-" + strconv.Itoa(k) + ".html"
}

func copyView(r *Reader, out, title string, create func(string) (*os.File, error)) (int, error) {
	f, err := create(out)
	if err != nil {
		return 0, err
	}
	v, err := NewView(f, title)
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
		if n > 0 && n%ViewPageSize == 0 {
			page := n/ViewPageSize + 1
			next := PageName(out, page)
			f, err := create(next)
			if err != nil {
				return n, err
			}
			if err := v.NextPage(filepath.Base(next), f, filepath.Base(PageName(out, page-1))); err != nil {
				return n, err
			}
		}
		if err := v.Add(rec); err != nil {
			return n, err
		}
	}
	return n, v.Close()
}

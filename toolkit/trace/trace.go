// Package trace records every message on both hops of a bridge as NDJSON
// (one Record a line) and reads such files back.
//
// A Writer is fed from Bridge.Tap, on the engine's loop: it copies the
// borrowed bytes and hands them to its own goroutine through a bounded
// channel, so that encoding, scrubbing and disk writes never run on the
// loop. A Reader tolerates a torn last line, since a trace of a bridge that
// was killed ends wherever the kill found it.
package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/tap"
	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/tidwall/gjson"
)

// Record kinds.
const (
	KindRequest      = "request"
	KindNotification = "notification"
	KindResponse     = "response"
	KindError        = "error"
	// KindFrame is an agent-hop message that is not JSON-RPC (a legacy
	// dialect's own frame); Method then holds its "type" when it has one.
	KindFrame = "frame"
	// KindNote is the bridge's own decision (a repair, a grace period), or
	// the trace's own "trace-truncated".
	KindNote = "note"
)

// NoteTruncated is the note of the last record of a trace that reached its
// size cap.
const NoteTruncated = "trace-truncated"

// Record is one line of a trace.
type Record struct {
	// TNs is monotonic nanoseconds since the trace started.
	TNs int64 `json:"t_ns"`
	// Time is the wall clock, RFC 3339 with nanoseconds.
	Time string `json:"time"`
	// Hop is "editor", "agent" or "bridge".
	Hop string `json:"hop"`
	// Dir is "in" for what the bridge received, "out" for what it sent;
	// empty for notes.
	Dir     string `json:"dir,omitempty"`
	Link    int    `json:"link,omitempty"`
	Session string `json:"session,omitempty"`
	Kind    string `json:"kind"`
	Method  string `json:"method,omitempty"`
	// ID is the JSON-RPC id, byte-exact.
	ID json.RawMessage `json:"id,omitempty"`
	// Msg is the message when it is valid JSON; Raw holds it otherwise.
	Msg    json.RawMessage `json:"msg,omitempty"`
	Raw    string          `json:"raw,omitempty"`
	Note   string          `json:"note,omitempty"`
	Detail string          `json:"detail,omitempty"`
	// Rule names the rule of the dialect that handled an inbound agent
	// message (a rule profile's event name, "reply session/prompt").
	Rule string `json:"rule,omitempty"`
}

// Message returns the message bytes of r: Msg, or Raw.
func (r Record) Message() []byte {
	if len(r.Msg) > 0 {
		return r.Msg
	}
	return []byte(r.Raw)
}

// Options shape a Writer.
type Options struct {
	// Max caps the file in bytes; 0 means no cap. The record that would
	// cross it is replaced by a note "trace-truncated", and nothing is
	// written after.
	Max int64
	// Scrub, if not nil, is applied to every line before it is written:
	// it removes secret values. It returns its argument when there is
	// nothing to remove.
	Scrub func([]byte) []byte
	// Append adds to an existing trace file instead of refusing it
	// (Create only).
	Append bool
	// Now is the clock; nil means time.Now. Monotonic offsets come from it.
	Now func() time.Time
	// Buffer is the number of records that may wait for the writing
	// goroutine; 0 means 4096. When it is full Tap waits for room, which
	// keeps a trace complete at the price of a short stall.
	Buffer int
}

// Writer writes a trace. Tap is its entry point; Close flushes it.
type Writer struct {
	opt   Options
	start time.Time
	w     io.Writer
	bw    *bufio.Writer
	c     io.Closer

	mu     sync.Mutex // guards closed and sends on ch
	closed bool
	ch     chan event
	done   chan struct{}

	// Owned by the writing goroutine.
	written int64
	stopped bool
	err     error
}

type event struct {
	at time.Time
	ev tap.Event
}

// Create creates the trace file path (mode 0600) and returns a Writer on
// it. path is never a symbolic link followed; an existing file is refused
// unless opt.Append, which adds to it. A "%p" in path is replaced by the
// process id first, so that every process started with the same flag
// keeps its own trace.
func Create(path string, opt Options) (*Writer, error) {
	path = ExpandPID(path)
	flags := os.O_CREATE | noFollow
	if opt.Append {
		flags |= os.O_RDWR | os.O_APPEND // read: to see how it ends
	} else {
		flags |= os.O_WRONLY | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		// O_EXCL refuses a link as existing, O_NOFOLLOW with ELOOP.
		if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&os.ModeSymlink != 0 {
			err = syscall.ELOOP
		}
		switch {
		case errors.Is(err, os.ErrExist):
			return nil, fmt.Errorf("%s exists: remove it, append to it with --trace-append, or put %%p (the process id) in the name to keep one trace per process", path)
		case errors.Is(err, syscall.ELOOP) || isLoop(err):
			return nil, fmt.Errorf("%s is a symbolic link; a trace is only written to a regular file it names: name the file itself", path)
		}
		return nil, err
	}
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s); name a file for the trace", path, st.Mode().Type())
	}
	if opt.Append {
		if err := endLine(f); err != nil {
			f.Close()
			return nil, err
		}
	}
	w := NewWriter(f, opt)
	w.c = f
	return w, nil
}

// endLine starts a new line in f if it ends inside one (a process killed
// mid-record), so that what is appended is not glued to the torn record.
func endLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return err
	}
	if last[0] != '\n' {
		_, err = f.Write([]byte{'\n'})
	}
	return err
}

// ExpandPID replaces every "%p" in name by the process id.
func ExpandPID(name string) string {
	return strings.ReplaceAll(name, "%p", strconv.Itoa(os.Getpid()))
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer, opt Options) *Writer {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Buffer <= 0 {
		opt.Buffer = 4096
	}
	tw := &Writer{
		opt:   opt,
		start: opt.Now(),
		w:     w,
		bw:    bufio.NewWriterSize(w, 64<<10),
		ch:    make(chan event, opt.Buffer),
		done:  make(chan struct{}),
	}
	go tw.run()
	return tw
}

// Tap records ev; it has Bridge.Tap's signature. The borrowed bytes are
// copied. After Close it does nothing.
func (w *Writer) Tap(ev tap.Event) {
	ev.Message = bytes.Clone(ev.Message)
	ev.Session = strings.Clone(ev.Session)
	at := w.opt.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.ch <- event{at: at, ev: ev}
}

// Close writes what is queued, flushes and closes the file (when Create
// opened it). It returns the first write error.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
	w.mu.Unlock()
	<-w.done
	err := w.err
	if w.c != nil {
		if cerr := w.c.Close(); err == nil {
			err = cerr
		}
		w.c = nil
	}
	return err
}

func (w *Writer) run() {
	defer close(w.done)
	for e := range w.ch {
		w.write(w.record(e))
		// Flush whenever the queue is empty, so that the file is current
		// while the bridge idles and a killed bridge loses little.
		if len(w.ch) == 0 && w.err == nil {
			w.err = w.bw.Flush()
		}
	}
	if w.err == nil {
		w.err = w.bw.Flush()
	}
}

func (w *Writer) record(e event) Record {
	ev := e.ev
	r := Record{
		TNs:     e.at.Sub(w.start).Nanoseconds(),
		Time:    e.at.Format(time.RFC3339Nano),
		Hop:     ev.Hop.String(),
		Link:    ev.Link,
		Session: ev.Session,
		Rule:    ev.Rule,
	}
	if ev.Hop == tap.BridgeHop {
		r.Kind, r.Note, r.Detail = KindNote, ev.Note, ev.Detail
		return r
	}
	r.Dir = "out"
	if ev.Inbound {
		r.Dir = "in"
	}
	Classify(&r, ev.Message)
	return r
}

// Classify fills r's Kind, Method, ID, Msg or Raw, and Session when empty,
// from the message msg.
func Classify(r *Record, msg []byte) {
	if !json.Valid(msg) {
		r.Raw = string(msg)
		r.Kind = KindFrame
		return
	}
	r.Msg = json.RawMessage(msg)
	id := gjson.GetBytes(msg, "id")
	method := gjson.GetBytes(msg, "method")
	if id.Exists() {
		r.ID = json.RawMessage(id.Raw)
	}
	switch {
	case method.Type == gjson.String && id.Exists():
		r.Kind, r.Method = KindRequest, method.Str
	case method.Type == gjson.String:
		r.Kind, r.Method = KindNotification, method.Str
	case id.Exists() && gjson.GetBytes(msg, "error").Exists():
		r.Kind = KindError
	case id.Exists() && gjson.GetBytes(msg, "result").Exists():
		r.Kind = KindResponse
	default:
		r.Kind = KindFrame
		if t := gjson.GetBytes(msg, "type"); t.Type == gjson.String {
			r.Method = t.Str
		}
	}
	if r.Session == "" {
		for _, p := range []string{"params.sessionId", "result.sessionId", "session_id", "sessionId"} {
			if s := gjson.GetBytes(msg, p); s.Type == gjson.String {
				r.Session = s.Str
				break
			}
		}
	}
}

func (w *Writer) write(r Record) {
	if w.stopped || w.err != nil {
		return
	}
	line := w.line(r)
	if w.opt.Max > 0 {
		note := w.line(Record{TNs: r.TNs, Time: r.Time, Hop: "bridge", Kind: KindNote, Note: NoteTruncated,
			Detail: fmt.Sprintf("the trace reached its cap of %d bytes; later messages are not recorded", w.opt.Max)})
		if w.written+int64(len(line))+int64(len(note)) > w.opt.Max {
			w.stopped = true
			line = note
		}
	}
	n, err := w.bw.Write(line)
	w.written += int64(n)
	w.err = err
}

// line encodes r as one scrubbed line, newline included. It encodes by
// hand rather than with json.Marshal, which would re-validate the message,
// and rewrite it too (compacted, with <, > and & escaped): the message is
// kept byte for byte, only compacted if it spans lines.
func (w *Writer) line(r Record) []byte {
	b := make([]byte, 0, 160+len(r.Msg)+len(r.Raw))
	b = append(b, `{"t_ns":`...)
	b = strconv.AppendInt(b, r.TNs, 10)
	b = appendField(b, "time", r.Time)
	b = appendField(b, "hop", r.Hop)
	b = appendField(b, "dir", r.Dir)
	if r.Link != 0 {
		b = append(b, `,"link":`...)
		b = strconv.AppendInt(b, int64(r.Link), 10)
	}
	b = appendField(b, "session", r.Session)
	b = appendField(b, "kind", r.Kind)
	b = appendField(b, "method", r.Method)
	if len(r.ID) > 0 {
		b = append(append(b, `,"id":`...), r.ID...)
	}
	if len(r.Msg) > 0 {
		b = append(b, `,"msg":`...)
		if bytes.ContainsAny(r.Msg, "\r\n") {
			var c bytes.Buffer
			_ = json.Compact(&c, r.Msg) // Msg is valid JSON
			b = append(b, c.Bytes()...)
		} else {
			b = append(b, r.Msg...)
		}
	}
	b = appendField(b, "raw", r.Raw)
	b = appendField(b, "note", r.Note)
	b = appendField(b, "detail", r.Detail)
	b = appendField(b, "rule", r.Rule)
	b = append(b, '}')
	if w.opt.Scrub != nil {
		b = w.opt.Scrub(b)
	}
	return append(b, '\n')
}

// appendField appends ,"name":"value" unless value is empty.
func appendField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(append(append(b, ',', '"'), name...), '"', ':')
	return wire.AppendString(b, value)
}

// ReadFile reads the trace at path.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Read reads a trace: see Reader.Next.
func Read(r io.Reader) ([]Record, error) {
	var out []Record
	tr := NewReader(r)
	for {
		rec, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// A Reader reads a trace one record at a time, so that what reads it
// holds one message at a time.
type Reader struct {
	br   *bufio.Reader
	n    int
	done bool
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReader(r)} }

// Next returns the next record, or io.EOF after the last. A record torn by
// a kill (the last line, without its newline, or a line that stops before
// its closing brace, which --trace-append may leave inside a trace) is
// dropped; any other line that does not parse is an error naming its line
// number.
func (tr *Reader) Next() (Record, error) {
	for !tr.done {
		tr.n++
		line, err := tr.br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return Record{}, err
		}
		torn := err == io.EOF // no newline: the last line
		tr.done = torn
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var rec Record
		uerr := json.Unmarshal(line, &rec)
		if uerr != nil && strings.Contains(uerr.Error(), "exceeded max depth") {
			// A message nested as deep as encoding/json allows is one
			// level deeper in its record: read that record with gjson.
			rec, uerr = recordOf(line)
		}
		if uerr != nil {
			// A record cut short by a kill: the last line, or one a
			// later process appended after (--trace-append).
			if torn || !bytes.HasSuffix(line, []byte("}")) {
				continue
			}
			return Record{}, fmt.Errorf("trace line %d: %v", tr.n, uerr)
		}
		return rec, nil
	}
	return Record{}, io.EOF
}

// recordOf decodes a record line with gjson, which has no nesting limit.
func recordOf(line []byte) (Record, error) {
	if !gjson.ValidBytes(line) || !gjson.ParseBytes(line).IsObject() {
		return Record{}, errors.New("not a JSON object")
	}
	g := gjson.ParseBytes(line)
	r := Record{TNs: g.Get("t_ns").Int(), Time: g.Get("time").Str, Hop: g.Get("hop").Str, Dir: g.Get("dir").Str,
		Link: int(g.Get("link").Int()), Session: g.Get("session").Str, Kind: g.Get("kind").Str, Method: g.Get("method").Str,
		Raw: g.Get("raw").Str, Note: g.Get("note").Str, Detail: g.Get("detail").Str, Rule: g.Get("rule").Str}
	if id := g.Get("id"); id.Exists() {
		r.ID = json.RawMessage(id.Raw)
	}
	if m := g.Get("msg"); m.Exists() {
		r.Msg = json.RawMessage(m.Raw)
	}
	return r, nil
}

package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// Transcript is a session read back whole (Load).
type Transcript struct {
	Meta    Meta
	Records []Record
	// Skipped counts lines that could not be read (torn or corrupt).
	Skipped int
}

// Reader reads a transcript back one record at a time, holding no more
// than the record being read (twice over) whatever the file's size.
type Reader struct {
	// Meta is the session's listing data when the Reader was opened.
	Meta Meta

	sid     string
	f       File
	br      *bufio.Reader
	line    []byte // a line longer than br's buffer, gathered
	max     int    // the longest line read; a longer one is skipped unread
	params  []byte // how the params of a short update start
	skipped int
	log     hclog.Logger
}

// newReader reads the records of session sid from src (nil: none).
func newReader(sid string, m Meta, f File, src io.Reader, log hclog.Logger) *Reader {
	r := &Reader{Meta: m, sid: sid, f: f, log: log, max: maxLine(0)}
	if src != nil {
		r.br = bufio.NewReaderSize(src, 64<<10)
	}
	return r
}

// read opens sid's transcript for reading, up to what is written now.
// Writer goroutine.
func (s *Store) read(sid string) (*Reader, error) {
	tp, _ := s.paths(sid)
	m, err := s.meta(sid)
	if err != nil {
		// Created by another process whose writer has not written the
		// listing data yet?
		if _, terr := s.fs.Lstat(tp); terr != nil {
			return nil, notFound(sid, err)
		}
		m = Meta{SessionID: sid}
	}
	var size int64 = -1
	if f := s.files[sid]; f != nil {
		s.flush(sid, f, false)
		size = f.end
	}
	fh, err := s.fs.OpenFile(tp, os.O_RDONLY|noFollow, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return newReader(sid, m, nil, nil, s.log), nil // listed, nothing written yet
		}
		return nil, fmt.Errorf("session %q: %w", sid, err)
	}
	st, err := fh.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (mode %v)", tp, st.Mode())
	}
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("session %q: %w", sid, err)
	}
	if size < 0 {
		size = st.Size() // another process may be appending: up to now
	}
	r := newReader(sid, m, fh, io.LimitReader(fh, size), s.log)
	r.max = maxLine(s.o.MaxSessionBytes)
	return r, nil
}

// Next returns the next record, io.EOF after the last. Lines that cannot
// be read are skipped (see Skipped); invalid UTF-8 becomes U+FFFD.
func (r *Reader) Next() (Record, error) {
	for {
		line, torn, err := r.readLine()
		if errors.Is(err, errLongLine) {
			r.skipped++
			r.log.Warn("session transcript: a line longer than any record the bridge writes ignored", "session", r.sid, "limit", r.max)
			continue
		}
		if err != nil {
			return Record{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rec, ok := r.decode(line) // copies what it keeps
		if cap(r.line) > 1<<20 {
			r.line = nil // a large record passed: do not hold its memory twice
		}
		if torn || !ok {
			r.skipped++
			what := "corrupt line"
			if torn {
				what = "torn last line (the bridge stopped in the middle of a write)"
			}
			r.log.Warn("session transcript: "+what+" ignored", "session", r.sid, "bytes", len(line))
			continue
		}
		return rec, nil
	}
}

// maxLine is the longest line a Reader reads of a transcript capped at
// capBytes (0: the default cap): the writer stores no record that would
// take a transcript past its cap, so a longer line is not one of its
// records, and reading it whole would cost memory without bound.
func maxLine(capBytes int64) int {
	if capBytes <= 0 {
		capBytes = 64 << 20
	}
	return int(capBytes) + 64<<10
}

// errLongLine reports a line longer than Reader.max, read past unkept.
var errLongLine = errors.New("line too long")

// readLine returns the next line without its newline; torn says the
// file ended before it did. A line longer than r.max is read past, and
// errLongLine returned.
func (r *Reader) readLine() (line []byte, torn bool, err error) {
	if r.br == nil {
		return nil, false, io.EOF
	}
	r.line = r.line[:0]
	for {
		b, err := r.br.ReadSlice('\n')
		switch {
		case err == nil && len(r.line) == 0:
			return b[:len(b)-1], false, nil // in br's buffer: no copy
		case err == nil:
			r.line = append(r.line, b[:len(b)-1]...)
			return r.line, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(r.line)+len(b) > r.max {
				r.line = nil
				return nil, false, r.skipLine()
			}
			r.line = append(r.line, b...)
		case errors.Is(err, io.EOF):
			r.line = append(r.line, b...)
			if len(r.line) == 0 {
				return nil, false, io.EOF
			}
			return r.line, true, nil
		default:
			return nil, false, err
		}
	}
}

// skipLine reads past the rest of a line, keeping nothing of it.
func (r *Reader) skipLine() error {
	for {
		_, err := r.br.ReadSlice('\n')
		switch {
		case err == nil:
			return errLongLine
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return errLongLine // (the next read finds the end)
		default:
			return err
		}
	}
}

var replacement = []byte(string(utf8.RuneError))

// decode reads one line as a record.
func (r *Reader) decode(line []byte) (Record, bool) {
	if !utf8.Valid(line) {
		line = bytes.ToValidUTF8(line, replacement)
	}
	if bytes.HasPrefix(line, []byte(shortPrefix)) {
		// A streamed update stored short (the writer gives it no time):
		// the params were {"sessionId":sid,"update": and what the line
		// holds after its prefix, members after "update" included. One
		// pass over the bytes, the bulk of a transcript.
		if r.params == nil {
			r.params = append(append([]byte(`{"sessionId":`), quote(r.sid)...), `,"update":`...)
		}
		body := append(r.params[:len(r.params):len(r.params)], line[len(shortPrefix):]...)
		if !json.Valid(body) {
			return Record{}, false
		}
		return Record{Kind: KindUpdate, Body: body}, true
	}
	var rec Record
	if json.Unmarshal(line, &rec) != nil || rec.Kind == "" {
		return Record{}, false
	}
	if rec.Kind == KindUpdate && len(rec.Body) > 0 && gjson.GetBytes(rec.Body, "jsonrpc").Exists() {
		// Stored as the whole notification (see KindUpdate).
		rec.Body = json.RawMessage(gjson.GetBytes(rec.Body, "params").Raw)
	}
	return rec, true
}

// Skipped counts the lines skipped so far (torn or corrupt).
func (r *Reader) Skipped() int { return r.skipped }

// Close closes the transcript.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f, r.br = nil, nil
	return err
}

// All reads every record left. The Meta it returns has the agent and
// backend of the last records that set them, should the listing data be
// older (a bridge killed before it was rewritten).
func (r *Reader) All() (*Transcript, error) {
	t := &Transcript{Meta: r.Meta}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch rec.Kind {
		case KindMeta, KindSwitch:
			if rec.Agent != "" {
				t.Meta.Agent, t.Meta.Dialect = rec.Agent, rec.Dialect
			}
		case KindBackend:
			t.Meta.Backend, t.Meta.Link = rec.Backend, rec.Link
		}
		t.Records = append(t.Records, rec)
	}
	t.Skipped = r.skipped
	return t, nil
}

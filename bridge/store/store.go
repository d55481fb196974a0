// Package store keeps the bridge's durable session transcripts: for every
// session, an append-only file of what the editor saw (prompts, every
// session/update, stop reasons, the agent that served it) under a state
// directory, so that sessions can be listed, loaded and resumed whatever the
// agent behind them remembers.
//
// Layout: one <name>.ndjson transcript per session and a <name>.json sidecar
// holding its listing data (id, cwd, title, agent, timestamps), rewritten
// atomically. <name> is the session id when it is a plain file name, else
// "x-" and its hex. The directory is created 0700, files 0600.
//
// Writing never blocks the caller: Append copies the record into a queue
// bounded by bytes (a Lines gathers a stream's updates without even a lock
// per update), and one writer goroutine of the Store's own encodes it and
// hands it to the OS; a session's file is fsynced, and its sidecar
// rewritten, at every turn end (a Record with Sync set) and every file at
// least once a second, by a second goroutine, so that a slow fsync never
// holds the writer up. When the queue is full (a disk far slower than the
// agent's stream) records are dropped and counted rather than stall the
// relay; the session's transcript then gets a "gap" record where they were
// lost, so that nobody mistakes it for complete.
//
// Reading is tolerant: a torn last line (a crash in the middle of a write)
// and any undecodable line are skipped with a warning, never an error.
//
// Bounds: binary payloads ("data" and "blob" strings, i.e. image, audio and
// resource blobs) longer than MaxInline are not stored: the string becomes
// "acp-bridge:omitted:N" (N its length; see Omitted). A transcript that reaches MaxSessionBytes takes no more records
// except its metadata and agent switches (one "cap" record marks the spot).
// At Open, sessions not updated for MaxAge, and the oldest beyond
// MaxSessions, are deleted; MaxSessions is enforced again whenever a new
// session is created.
package store

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// Record kinds.
const (
	KindMeta   = "meta"   // Agent, Dialect, Cwd of a session opened or reopened
	KindPrompt = "prompt" // Body: the session/prompt params
	KindUpdate = "update" // Body: the session/update params sent to the editor, or the whole notification (Load gives the params)
	KindStop   = "stop"   // Body: the prompt's result, or its error object
	KindSwitch = "switch" // Agent, Dialect: the session moved to another agent
	KindGap    = "gap"    // Body: {"dropped":N}: records lost to a full queue
	KindCap    = "cap"    // the size cap was reached; later records dropped
)

// Record is one line of a transcript.
type Record struct {
	Kind    string          `json:"t"`
	At      time.Time       `json:"at,omitzero"`
	Agent   string          `json:"agent,omitempty"`
	Dialect string          `json:"dialect,omitempty"`
	Cwd     string          `json:"cwd,omitempty"`
	Failed  bool            `json:"failed,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"`
	// U is the update member of a KindUpdate record stored short; Load
	// rebuilds Body from it.
	U json.RawMessage `json:"u,omitempty"`
	// Sync asks for the file to be flushed and fsynced once this record is
	// written (a turn's end). Not stored.
	Sync bool `json:"-"`
	// New marks the meta record of a session just created: a transcript
	// already filed under its id (an agent that hands out ids again after
	// a restart) is another conversation, and is moved aside to the id
	// "ID~N" first. Not stored.
	New bool `json:"-"`
}

// Meta is a session's listing data (the sidecar file).
type Meta struct {
	SessionID string    `json:"sessionId"`
	Cwd       string    `json:"cwd"`
	Title     string    `json:"title,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Dialect   string    `json:"dialect,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Transcript is a session read back.
type Transcript struct {
	Meta    Meta
	Records []Record
	// Skipped counts lines that could not be read (torn or corrupt).
	Skipped int
}

// Options configure a Store. Zero values mean the defaults given.
type Options struct {
	// Dir is the state directory (created if missing).
	Dir string
	// MaxInline is the longest binary payload stored; 0 means 64 KiB.
	MaxInline int
	// MaxSessionBytes caps one transcript; 0 means 64 MiB.
	MaxSessionBytes int64
	// MaxAge deletes sessions not updated for that long; 0 means 30 days,
	// negative keeps them forever.
	MaxAge time.Duration
	// MaxSessions keeps at most that many sessions; 0 means 1000, negative
	// means no limit.
	MaxSessions int
	// QueueBytes bounds the records waiting for the writer; 0 means 4 MiB.
	QueueBytes int
	// FlushEvery is the longest a written record waits for its fsync; 0
	// means 1 s.
	FlushEvery time.Duration
	Logger     hclog.Logger
}

// DefaultDir is $XDG_STATE_HOME/acp-bridge, else ~/.local/state/acp-bridge.
func DefaultDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "acp-bridge")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "acp-bridge-state")
	}
	return filepath.Join(home, ".local", "state", "acp-bridge")
}

// Store is a directory of transcripts. Its methods are safe for concurrent
// use; callbacks run on the Store's writer goroutine and must not call back
// into the Store synchronously.
type Store struct {
	o   Options
	log hclog.Logger

	mu    sync.Mutex
	queue []op
	arena []byte // the queued records' bodies, back to back
	bytes int
	// handOff is the queued size at which the writer is woken at once.
	handOff int
	dropped map[string]int // per session, since the last gap record
	total   int64          // records ever dropped
	closed  bool
	wake    chan struct{} // the queue is no longer empty
	urgent  chan struct{} // write now: a turn ended, a read waits, Close
	done    chan struct{}

	sy syncer

	// writer-owned
	files map[string]*file
	now   time.Time // when the batch being written was taken
	// nowText is now, formatted once per batch.
	nowText []byte
}

type op struct {
	sid, kind string  // kind "" for fn and stop
	off, n    int     // the body: arena[off:off+n]
	extra     *Record // the other fields of a record that has some
	fn        func()  // a read, list or delete, run in order with the writes
	stop      bool
}

type file struct {
	f      *os.File
	pend   []byte // encoded records not yet written (one write per batch)
	meta   Meta
	size   int64
	capped bool
	dirty  bool // written since the last fsync
	metaD  bool // meta changed since the sidecar was written

	// jobs counts the syncer's jobs for this file not yet done: the
	// writer waits for them before it closes the file (file.close).
	jobs sync.WaitGroup
	// The job waiting in the syncer's queue, if any (syncer.mu).
	queued             bool
	needSync, needMeta bool
	snap               Meta // the listing data to write
}

// Open opens (creating) the state directory, applies retention and starts
// the writer.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("store: no state directory")
	}
	if o.MaxInline <= 0 {
		o.MaxInline = 64 << 10
	}
	if o.MaxSessionBytes <= 0 {
		o.MaxSessionBytes = 64 << 20
	}
	if o.MaxAge == 0 {
		o.MaxAge = 30 * 24 * time.Hour
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = 1000
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 4 << 20
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the session state directory: %w", err)
	}
	if err := os.Chmod(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("securing the session state directory: %w", err)
	}
	s := &Store{o: o, log: o.Logger, dropped: map[string]int{}, wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
		done: make(chan struct{}), files: map[string]*file{}}
	// A stream is handed to the writer in blocks that stay in the CPU's
	// cache (copying into a cold multi-megabyte arena cost the relay
	// more than the copy itself), and the two arenas the Store and its
	// writer swap are sized for a block up front, so none of them grows
	// while streaming.
	s.handOff = min(o.QueueBytes/4, handOffBytes)
	s.arena = make([]byte, 0, s.handOff+s.handOff/2)
	s.sy = syncer{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.retain("")
	go s.sy.run(s)
	go s.run()
	return s, nil
}

// Dir returns the state directory.
func (s *Store) Dir() string { return s.o.Dir }

// Dropped returns how many records were dropped because the queue was full.
func (s *Store) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Append queues r for session sid. It copies r.Body and never blocks.
//
// A record without At gets the time the writer takes it (within
// batchDelay): reading the clock for every streamed update costs the
// engine's loop more than the rest of Append.
func (s *Store) Append(sid string, r Record) {
	if r.Kind == KindUpdate && r.At.IsZero() && !r.Sync && !r.Failed {
		s.AppendUpdate(sid, r.Body)
		return
	}
	extra := r
	extra.Body = nil
	s.add(sid, r.Kind, r.Body, r.Sync, &extra)
}

// AppendUpdate is Append of an update record: the engine's hot path, one
// call per streamed update.
//
// The record is encoded here, straight into the queue's arena, and a run
// of updates for one session travels as one block of lines: per update,
// the engine's loop pays a lock and a copy, the writer nothing.
func (s *Store) AppendUpdate(sid string, body []byte) {
	s.appendLine(sid, body, linePrefix)
}

// AppendSessionUpdate is AppendUpdate given only the params' "update"
// member, for params that are exactly {"sessionId":sid,"update":update}:
// the record leaves out what Load can put back, a third of a streamed
// update's bytes.
func (s *Store) AppendSessionUpdate(sid string, update []byte) {
	s.appendLine(sid, update, shortPrefix)
}

func (s *Store) appendLine(sid string, body []byte, prefix string) {
	if len(body) > s.o.MaxInline {
		s.appendLarge(sid, body, prefix)
		return
	}
	n := len(prefix) + len(body) + 2
	s.mu.Lock()
	if !s.admit(sid, KindUpdate, n, 1) {
		s.mu.Unlock()
		return
	}
	k, first := s.linesOp(sid)
	s.arena = append(append(append(s.arena, prefix...), body...), "}\n"...)
	s.queued(k, n, first)
}

// appendLarge queues an update whose payload is cut first (see MaxInline).
func (s *Store) appendLarge(sid string, body []byte, prefix string) {
	if prefix == shortPrefix {
		body = fmt.Appendf(nil, `{"sessionId":%s,"update":%s}`, quote(sid), body)
	}
	s.add(sid, KindUpdate, body, false, nil)
}

// linesOp returns the index of the queue's last op when it holds sid's
// lines, else of a new one; first says the queue was empty. s.mu is held.
func (s *Store) linesOp(sid string) (k int, first bool) {
	first = len(s.queue) == 0
	k = len(s.queue) - 1
	if k < 0 || s.queue[k].kind != kindLines || s.queue[k].sid != sid {
		s.queue = append(s.queue, op{sid: sid, kind: kindLines, off: len(s.arena)})
		k++
	}
	return k, first
}

// queued accounts for n bytes of lines just added to op k, unlocks s.mu
// and wakes the writer if it should look.
func (s *Store) queued(k, n int, first bool) {
	s.queue[k].n += n
	s.bytes += n
	urgent := s.bytes >= s.handOff
	s.mu.Unlock()
	switch {
	case urgent:
		signal(s.urgent)
	case first:
		signal(s.wake)
	}
}

// Lines gathers a run of update records on its caller's goroutine, with
// no lock, and hands them to the Store in one piece: per streamed update
// the caller pays one copy into a small buffer that stays in cache, and
// the Store's lock is taken once per run. A Lines belongs to one goroutine.
// Records reach the Store, in order, at Flush (and whenever the run
// changes session or grows past linesBytes); a caller that also appends
// other records, or reads, flushes first.
type Lines struct {
	s   *Store
	sid string
	buf []byte
	n   int // records in buf
}

// linesBytes is the most a Lines holds before it hands its records over.
const linesBytes = 32 << 10

// Lines returns a new Lines for s.
func (s *Store) Lines() *Lines { return &Lines{s: s} }

// Update is AppendUpdate through l.
func (l *Lines) Update(sid string, body []byte) { l.add(sid, body, linePrefix) }

// SessionUpdate is AppendSessionUpdate through l.
func (l *Lines) SessionUpdate(sid string, update []byte) { l.add(sid, update, shortPrefix) }

func (l *Lines) add(sid string, body []byte, prefix string) {
	if sid != l.sid || len(body) > l.s.o.MaxInline {
		l.Flush()
		if len(body) > l.s.o.MaxInline {
			l.s.appendLarge(sid, body, prefix)
			return
		}
		l.sid = sid
	}
	l.buf = append(append(append(l.buf, prefix...), body...), "}\n"...)
	l.n++
	if len(l.buf) >= linesBytes {
		l.Flush()
	}
}

// Flush hands the records gathered to the Store.
func (l *Lines) Flush() {
	if l.n == 0 {
		return
	}
	s := l.s
	s.mu.Lock()
	if s.admit(l.sid, KindUpdate, len(l.buf), l.n) {
		k, first := s.linesOp(l.sid)
		s.arena = append(s.arena, l.buf...)
		s.queued(k, len(l.buf), first)
	} else {
		s.mu.Unlock()
	}
	l.buf, l.n = l.buf[:0], 0
}

// kindLines is an op holding encoded update lines (AppendUpdate).
const kindLines = "lines"

// linePrefix starts an encoded update record (see encode); shortPrefix
// one that holds only the update member of its params (kindShort).
const (
	linePrefix  = `{"t":"update","body":`
	shortPrefix = `{"t":"u","u":`
	kindShort   = "u"
)

func quote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// admit decides whether records (n bytes in all) fit the queue, counting
// them dropped when they do not; s.mu is held.
func (s *Store) admit(sid, kind string, n, records int) bool {
	if s.closed {
		return false
	}
	if s.bytes+n > s.o.QueueBytes && s.bytes > 0 && kind != KindMeta && kind != KindSwitch {
		before := s.total
		s.dropped[sid] += records
		s.total += int64(records)
		if before == 0 || s.total/1000 != before/1000 {
			s.log.Warn("session transcript writer is behind: records dropped (the disk is slower than the agent's stream)", "dropped", s.total)
		}
		return false
	}
	if len(s.dropped) > 0 {
		if d := s.dropped[sid]; d > 0 {
			delete(s.dropped, sid)
			s.push(sid, KindGap, fmt.Appendf(nil, `{"dropped":%d}`, d), nil)
		}
	}
	return true
}

func (s *Store) add(sid, kind string, body []byte, sync bool, extra *Record) {
	if len(body) > s.o.MaxInline {
		body = omitLarge(body, s.o.MaxInline)
	}
	n := len(body) + recordOverhead
	s.mu.Lock()
	if !s.admit(sid, kind, n, 1) {
		s.mu.Unlock()
		return
	}
	first := len(s.queue) == 0
	s.push(sid, kind, body, extra)
	s.bytes += n
	urgent := sync || s.bytes >= s.handOff
	s.mu.Unlock()
	switch {
	case urgent:
		signal(s.urgent)
	case first:
		signal(s.wake)
	}
}

// push queues a record, its body copied into the arena; s.mu is held.
func (s *Store) push(sid, kind string, body []byte, extra *Record) {
	off := len(s.arena)
	s.arena = append(s.arena, body...)
	s.queue = append(s.queue, op{sid: sid, kind: kind, off: off, n: len(body), extra: extra})
}

// do runs fn on the writer goroutine after every record queued before it.
func (s *Store) do(fn func()) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, op{fn: fn})
	s.mu.Unlock()
	signal(s.urgent)
	return true
}

// handOffBytes is the most a stream queues before the writer is woken.
const handOffBytes = 256 << 10

// batchDelay is how long the writer lets records gather once the queue is
// no longer empty: a bridge killed loses at most that much of a stream.
const batchDelay = 10 * time.Millisecond

// recordOverhead is what a queued record costs besides its body (the
// Record and its queue slot), counted against Options.QueueBytes.
const recordOverhead = 128

// ErrClosed is reported to callbacks of a Store that was closed.
var ErrClosed = errors.New("the session store is closed")

// Load reads session sid back, after everything queued for it is written,
// and passes it to done (on the writer goroutine). A session the store does
// not have is reported with an error wrapping fs.ErrNotExist.
func (s *Store) Load(sid string, done func(*Transcript, error)) {
	if !s.do(func() { done(s.load(sid)) }) {
		done(nil, ErrClosed)
	}
}

// List passes done the sessions whose cwd is cwd ("" for all), newest
// first, at most limit of them after cursor, and the cursor of the next
// page ("" when there is none).
func (s *Store) List(cwd, cursor string, limit int, done func([]Meta, string, error)) {
	if !s.do(func() { done(s.list(cwd, cursor, limit)) }) {
		done(nil, "", ErrClosed)
	}
}

// Delete removes session sid's files; done gets fs.ErrNotExist when there
// were none.
func (s *Store) Delete(sid string, done func(error)) {
	if !s.do(func() { done(s.remove(sid)) }) {
		done(ErrClosed)
	}
}

// Has reports (to done) whether session sid has a transcript.
func (s *Store) Has(sid string, done func(Meta, bool)) {
	if !s.do(func() {
		m, err := s.meta(sid)
		done(m, err == nil)
	}) {
		done(Meta{}, false)
	}
}

// Close writes and fsyncs everything queued and stops the writer.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.closed = true
	s.queue = append(s.queue, op{stop: true})
	s.mu.Unlock()
	signal(s.urgent)
	<-s.done
	return nil
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run is the writer goroutine.
func (s *Store) run() {
	defer close(s.done)
	tick := time.NewTicker(s.o.FlushEvery)
	defer tick.Stop()
	var batch []op
	arena := make([]byte, 0, s.handOff+s.handOff/2) // as Open made s.arena
	delay := time.NewTimer(time.Hour)
	delay.Stop()
	for {
		select {
		case <-s.wake:
			// Let a stream's records gather: one write per batchDelay
			// rather than one wake-up per update.
			delay.Reset(batchDelay)
			select {
			case <-delay.C:
			case <-s.urgent:
				delay.Stop()
			}
		case <-s.urgent:
		case <-tick.C:
			s.flushAll()
			continue
		}
		s.mu.Lock()
		batch, s.queue = s.queue, batch[:0]
		arena, s.arena = s.arena, arena[:0]
		s.bytes = 0
		s.mu.Unlock()
		s.now = time.Now()
		s.nowText = s.now.UTC().AppendFormat(s.nowText[:0], time.RFC3339Nano)
		for i, o := range batch {
			batch[i] = op{}
			switch {
			case o.stop:
				s.flushAll()
				for sid, f := range s.files {
					f.close()
					delete(s.files, sid)
				}
				close(s.sy.stop)
				<-s.sy.done
				return
			case o.fn != nil:
				o.fn()
			case o.kind == kindLines:
				s.writeLines(o.sid, arena[o.off:o.off+o.n])
			case o.kind != "":
				rec := Record{Kind: o.kind}
				if o.extra != nil {
					rec = *o.extra
				}
				rec.Body = arena[o.off : o.off+o.n : o.off+o.n]
				if rec.At.IsZero() {
					rec.At = s.now
				}
				s.write(o.sid, &rec)
			}
		}
		if cap(arena) > 2*s.o.QueueBytes {
			arena = nil // a large prompt passed: do not keep its memory
		}
		// Hand each batch to the OS at once: a bridge killed now loses
		// nothing it wrote (a machine that crashes loses up to a second).
		for sid, f := range s.files {
			if len(f.pend) > 0 {
				if err := f.writeOut(); err != nil {
					s.log.Warn("session transcript write failed", "session", sid, "error", err)
				}
			}
		}
	}
}

// name is the file name stem of session sid.
func name(sid string) string {
	plain := sid != "" && len(sid) <= 100 && sid[0] != '.' && strings.IndexFunc(sid, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
	if plain && !strings.HasPrefix(sid, "x-") {
		return sid
	}
	return "x-" + hex.EncodeToString([]byte(sid))
}

func (s *Store) paths(sid string) (transcript, sidecar string) {
	n := name(sid)
	return filepath.Join(s.o.Dir, n+".ndjson"), filepath.Join(s.o.Dir, n+".json")
}

// open returns the open file of sid, creating the session when new.
func (s *Store) open(sid string, r *Record) (*file, error) {
	if f := s.files[sid]; f != nil {
		return f, nil
	}
	tp, _ := s.paths(sid)
	m, err := s.meta(sid)
	fresh := err != nil
	if fresh {
		m = Meta{SessionID: sid, CreatedAt: r.At, UpdatedAt: r.At, Cwd: r.Cwd, Agent: r.Agent, Dialect: r.Dialect}
	}
	fh, err := os.OpenFile(tp, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f := &file{f: fh, meta: m, size: st.Size(), metaD: fresh}
	f.capped = f.size >= s.o.MaxSessionBytes
	if len(s.files) >= 64 {
		s.flushAll()
		for id, g := range s.files {
			g.close()
			delete(s.files, id)
		}
	}
	s.files[sid] = f
	if fresh {
		// Listed at once: a bridge killed before its first flush must not
		// leave a transcript nobody can find.
		if err := s.writeMeta(sid, m); err != nil {
			s.log.Warn("session listing data not written", "session", sid, "error", err)
		}
		s.retain(sid)
	}
	return f, nil
}

// write encodes one record into sid's file.
func (s *Store) write(sid string, r *Record) {
	if r.New {
		s.archive(sid)
	}
	f, err := s.open(sid, r)
	if err != nil {
		s.log.Warn("session transcript not written", "session", sid, "error", err)
		return
	}
	switch r.Kind {
	case KindMeta, KindSwitch:
		if r.Agent != "" {
			f.meta.Agent, f.meta.Dialect = r.Agent, r.Dialect
		}
		if r.Cwd != "" {
			f.meta.Cwd = r.Cwd
		}
		f.metaD = true
	case KindPrompt:
		if f.meta.Title == "" {
			f.meta.Title = Title(r.Body)
			f.metaD = f.meta.Title != ""
		}
	}
	if f.capped && r.Kind != KindMeta && r.Kind != KindSwitch {
		return
	}
	start := len(f.pend)
	f.pend = s.encode(f.pend, r)
	if !f.capped && f.size+int64(len(f.pend)-start) > s.o.MaxSessionBytes && r.Kind != KindMeta && r.Kind != KindSwitch {
		f.capped = true
		s.log.Warn("session transcript reached its size cap; later records are not stored", "session", sid, "cap", s.o.MaxSessionBytes)
		f.pend = s.encode(f.pend[:start], &Record{Kind: KindCap, At: r.At})
	}
	f.size += int64(len(f.pend) - start)
	f.dirty = true
	if r.At.After(f.meta.UpdatedAt) {
		f.meta.UpdatedAt = r.At
	}
	if r.Kind != KindUpdate {
		f.metaD = true
	}
	if r.Sync {
		s.flush(sid, f)
	}
}

// writeLines appends a block of encoded update lines to sid's transcript.
func (s *Store) writeLines(sid string, lines []byte) {
	f, err := s.open(sid, &Record{Kind: KindUpdate, At: s.now})
	if err != nil {
		s.log.Warn("session transcript not written", "session", sid, "error", err)
		return
	}
	if f.capped {
		return
	}
	capped := false
	if room := s.o.MaxSessionBytes - f.size; int64(len(lines)) > room {
		lines = lines[:bytes.LastIndexByte(lines[:max(room, 0)], '\n')+1]
		capped = true
	}
	// The block is already encoded: written as it is, after any record
	// still pending for the file (order), with no copy.
	if len(f.pend) > 0 {
		if err := f.writeOut(); err != nil {
			s.log.Warn("session transcript write failed", "session", sid, "error", err)
		}
	}
	if _, err := f.f.Write(lines); err != nil {
		s.log.Warn("session transcript write failed", "session", sid, "error", err)
	}
	f.size += int64(len(lines))
	if capped {
		f.capped = true
		s.log.Warn("session transcript reached its size cap; later records are not stored", "session", sid, "cap", s.o.MaxSessionBytes)
		start := len(f.pend)
		f.pend = s.encode(f.pend, &Record{Kind: KindCap, At: s.now})
		f.size += int64(len(f.pend) - start)
	}
	f.dirty = true
	if s.now.After(f.meta.UpdatedAt) {
		f.meta.UpdatedAt = s.now
	}
}

// encode renders r as one line, in the writer's reused buffer. It is
// json.Marshal's output without its cost per streamed update: Body is
// already valid JSON (what the editor was sent).
func (s *Store) encode(b []byte, r *Record) []byte {
	b = append(b, `{"t":"`...)
	b = append(b, r.Kind...) // one of the Kind constants: no escaping
	b = append(b, '"')
	switch {
	case r.Kind == KindUpdate && r.At.Equal(s.now):
		// Streamed updates carry no time of their own: a transcript is
		// read back by the time of the records around them.
	case r.At.Equal(s.now):
		b = append(b, `,"at":"`...)
		b = append(b, s.nowText...)
		b = append(b, '"')
	default:
		b = append(b, `,"at":"`...)
		b = r.At.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	for _, f := range [...]struct{ k, v string }{{"agent", r.Agent}, {"dialect", r.Dialect}, {"cwd", r.Cwd}} {
		if f.v != "" {
			b = append(b, `,"`+f.k+`":`...)
			b = appendString(b, f.v)
		}
	}
	if r.Failed {
		b = append(b, `,"failed":true`...)
	}
	if len(r.Body) > 0 {
		b = append(b, `,"body":`...)
		b = append(b, bytes.TrimSpace(r.Body)...)
	}
	return append(b, "}\n"...)
}

// writeOut hands f's pending records to the OS.
func (f *file) writeOut() error {
	_, err := f.f.Write(f.pend)
	f.pend = f.pend[:0]
	if cap(f.pend) > 1<<20 {
		f.pend = nil // a large record passed: do not keep its memory
	}
	return err
}

func appendString(b []byte, v string) []byte {
	q, _ := json.Marshal(v)
	return append(b, q...)
}

// flush writes sid's buffer, fsyncs it and rewrites its sidecar if needed.
//
// The fsync and the sidecar are the syncer's: an fsync can take the disk's
// time to write out everything the stream wrote, and the writer must keep
// taking records meanwhile or the queue fills and records are dropped.
func (s *Store) flush(sid string, f *file) {
	var sync, meta bool
	if f.dirty {
		if err := f.writeOut(); err != nil {
			s.log.Warn("session transcript write failed", "session", sid, "error", err)
		}
		f.dirty = false
		f.metaD = true // updatedAt moved
		sync = true
	}
	if f.metaD {
		f.metaD = false
		meta = true
	}
	if sync || meta {
		s.sy.add(sid, f, sync, meta)
	}
}

// close closes f once the syncer is done with it.
func (f *file) close() {
	f.jobs.Wait()
	f.f.Close()
}

// syncer is the goroutine that fsyncs transcripts and rewrites their
// sidecars, off the writer's path. Jobs for one file coalesce: one fsync
// covers every write before it, and the newest listing data is the one
// written.
type syncer struct {
	mu    sync.Mutex
	queue []syncJob
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

type syncJob struct {
	sid string
	f   *file
}

// add asks for f to be fsynced (sync) and its sidecar written (meta), from
// the writer goroutine.
func (y *syncer) add(sid string, f *file, sync, meta bool) {
	y.mu.Lock()
	f.needSync = f.needSync || sync
	if meta {
		f.needMeta, f.snap = true, f.meta
	}
	if !f.queued {
		f.queued = true
		f.jobs.Add(1)
		y.queue = append(y.queue, syncJob{sid, f})
	}
	y.mu.Unlock()
	signal(y.wake)
}

func (y *syncer) run(s *Store) {
	defer close(y.done)
	var jobs []syncJob
	for {
		select {
		case <-y.wake:
		case <-y.stop:
			// The writer stopped after waiting for every file's jobs.
			return
		}
		y.mu.Lock()
		jobs, y.queue = y.queue, jobs[:0]
		y.mu.Unlock()
		for i, j := range jobs {
			jobs[i] = syncJob{}
			y.mu.Lock()
			f := j.f
			sync, meta, snap := f.needSync, f.needMeta, f.snap
			f.queued, f.needSync, f.needMeta = false, false, false
			y.mu.Unlock()
			if sync {
				if err := f.f.Sync(); err != nil {
					s.log.Warn("session transcript fsync failed", "session", j.sid, "error", err)
				}
			}
			if meta {
				if err := s.writeMeta(j.sid, snap); err != nil {
					s.log.Warn("session listing data not written", "session", j.sid, "error", err)
				}
			}
			f.jobs.Done()
		}
	}
}

func (s *Store) flushAll() {
	for sid, f := range s.files {
		s.flush(sid, f)
	}
}

func (s *Store) writeMeta(sid string, m Meta) error {
	_, mp := s.paths(sid)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.o.Dir, ".meta-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), mp)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// meta returns sid's listing data, from the open file or the sidecar.
func (s *Store) meta(sid string) (Meta, error) {
	if f := s.files[sid]; f != nil {
		return f.meta, nil
	}
	_, mp := s.paths(sid)
	return readMeta(mp)
}

func readMeta(path string) (Meta, error) {
	var m Meta
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil || m.SessionID == "" {
		return m, fmt.Errorf("%s: unreadable session listing data: %w", path, fs.ErrNotExist)
	}
	return m, nil
}

func (s *Store) load(sid string) (*Transcript, error) {
	m, err := s.meta(sid)
	if err != nil {
		return nil, fmt.Errorf("no transcript of session %q: %w", sid, fs.ErrNotExist)
	}
	if f := s.files[sid]; f != nil {
		s.flush(sid, f)
	}
	tp, _ := s.paths(sid)
	data, err := os.ReadFile(tp)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	t := &Transcript{Meta: m}
	for len(data) > 0 {
		line := data
		i := bytes.IndexByte(data, '\n')
		last := i < 0
		if !last {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r Record
		if last || json.Unmarshal(line, &r) != nil || r.Kind == "" {
			t.Skipped++
			what := "corrupt line"
			if last {
				what = "torn last line (the bridge stopped in the middle of a write)"
			}
			s.log.Warn("session transcript: "+what+" ignored", "session", sid, "bytes", len(line))
			continue
		}
		if r.Kind == kindShort && bytes.HasPrefix(line, []byte(shortPrefix)) {
			// The params were {"sessionId":sid,"update": and what the
			// line holds after its prefix, members after "update"
			// included.
			body := append([]byte(`{"sessionId":`), quote(sid)...)
			body = append(append(body, `,"update":`...), line[len(shortPrefix):]...)
			r = Record{Kind: KindUpdate, At: r.At, Body: body}
		}
		if r.Kind == KindUpdate && len(r.Body) > 0 && gjson.GetBytes(r.Body, "jsonrpc").Exists() {
			// Stored as the whole notification (see KindUpdate).
			r.Body = json.RawMessage(gjson.GetBytes(r.Body, "params").Raw)
		}
		t.Records = append(t.Records, r)
	}
	return t, nil
}

// archive moves an existing transcript of sid aside, to a fresh id.
func (s *Store) archive(sid string) {
	m, err := s.meta(sid)
	if err != nil {
		return
	}
	if f := s.files[sid]; f != nil {
		s.flush(sid, f)
		f.close()
		delete(s.files, sid)
	}
	var to string
	for i := 1; ; i++ {
		to = fmt.Sprintf("%s~%d", sid, i)
		if _, err := s.meta(to); err != nil {
			break
		}
	}
	tp, mp := s.paths(sid)
	ntp, _ := s.paths(to)
	m.SessionID = to
	err = s.writeMeta(to, m)
	if err == nil {
		err = os.Rename(tp, ntp)
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		err = os.Remove(mp)
	}
	if err != nil {
		s.log.Warn("earlier transcript under a reused session id not moved aside", "session", sid, "error", err)
		return
	}
	s.log.Info("the agent reused a session id: its earlier transcript moved aside", "session", sid, "now", to)
}

func (s *Store) remove(sid string) error {
	if f := s.files[sid]; f != nil {
		f.close()
		delete(s.files, sid)
	}
	tp, mp := s.paths(sid)
	err1 := os.Remove(mp)
	err2 := os.Remove(tp)
	if err1 != nil && err2 != nil {
		return fmt.Errorf("no transcript of session %q: %w", sid, fs.ErrNotExist)
	}
	return nil
}

// all returns every session's listing data, newest first.
func (s *Store) all() []Meta {
	ents, _ := os.ReadDir(s.o.Dir)
	var out []Meta
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		m, err := readMeta(filepath.Join(s.o.Dir, n))
		if err != nil {
			continue
		}
		if f := s.files[m.SessionID]; f != nil {
			m = f.meta
		}
		out = append(out, m)
	}
	for sid, f := range s.files { // sessions whose listing data is not on disk yet
		if !slices.ContainsFunc(out, func(m Meta) bool { return m.SessionID == sid }) {
			out = append(out, f.meta)
		}
	}
	slices.SortFunc(out, func(a, b Meta) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SessionID, b.SessionID)
	})
	return out
}

type cursor struct {
	U  int64  `json:"u"`
	ID string `json:"id"`
}

func (s *Store) list(cwd, cur string, limit int) ([]Meta, string, error) {
	if limit <= 0 {
		limit = 100
	}
	var after *cursor
	if cur != "" {
		b, err := base64.RawURLEncoding.DecodeString(cur)
		var c cursor
		if err != nil || json.Unmarshal(b, &c) != nil {
			return nil, "", fmt.Errorf("invalid cursor %q: pass the nextCursor of a previous session/list answer", cur)
		}
		after = &c
	}
	var page []Meta
	for _, m := range s.all() {
		if cwd != "" && filepath.Clean(m.Cwd) != filepath.Clean(cwd) {
			continue
		}
		if after != nil {
			u := m.UpdatedAt.UnixNano()
			if u > after.U || u == after.U && m.SessionID <= after.ID {
				continue
			}
		}
		if len(page) == limit {
			last := page[len(page)-1]
			b, _ := json.Marshal(cursor{U: last.UpdatedAt.UnixNano(), ID: last.SessionID})
			return page, base64.RawURLEncoding.EncodeToString(b), nil
		}
		page = append(page, m)
	}
	return page, "", nil
}

// retain deletes sessions beyond the age and count limits, never keep.
func (s *Store) retain(keep string) {
	all := s.all()
	now := time.Now()
	n := 0
	if keep != "" && !slices.ContainsFunc(all, func(m Meta) bool { return m.SessionID == keep }) {
		n = 1 // a session just created has no listing data on disk yet
	}
	for _, m := range all {
		old := s.o.MaxAge > 0 && now.Sub(m.UpdatedAt) > s.o.MaxAge
		over := s.o.MaxSessions > 0 && n >= s.o.MaxSessions
		if m.SessionID != keep && (old || over) {
			if s.remove(m.SessionID) == nil {
				s.log.Debug("session transcript removed by retention", "session", m.SessionID, "updated", m.UpdatedAt)
			}
			continue
		}
		n++
	}
}

// Title is a session title from a prompt's params: its first text block's
// first line, at most 80 characters.
func Title(params json.RawMessage) string {
	var p struct {
		Prompt []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"prompt"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	for _, b := range p.Prompt {
		if b.Type != "text" {
			continue
		}
		t := strings.TrimSpace(b.Text)
		if i := strings.IndexByte(t, '\n'); i >= 0 {
			t = strings.TrimSpace(t[:i])
		}
		if r := []rune(t); len(r) > 80 {
			t = string(r[:79]) + "…"
		}
		if t != "" {
			return t
		}
	}
	return ""
}

// Omitted is the prefix of the string that replaces an omitted payload:
// "acp-bridge:omitted:N" for N bytes (never valid base64, so never data).
const Omitted = "acp-bridge:omitted:"

// omitLarge replaces "data" and "blob" string values longer than max in
// body by Omitted and their length, splicing bytes: one pass, no decoding,
// since body may be a 40 MiB prompt and this runs on the caller's goroutine
// (copying only what is kept). body is valid JSON.
func omitLarge(body []byte, max int) []byte {
	type span struct{ from, to int }
	var spans []span
	keyEnd, key := -1, ""
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		start := i
		for i++; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' {
				i++
			}
		}
		end := i + 1 // past the closing quote
		j := end
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j < len(body) && body[j] == ':' {
			keyEnd, key = j+1, string(body[start+1:end-1])
			continue
		}
		if end-start-2 > max && (key == "data" || key == "blob") && len(bytes.TrimSpace(body[keyEnd:start])) == 0 {
			spans = append(spans, span{start, end})
		}
		key = ""
	}
	if len(spans) == 0 {
		return body
	}
	out := make([]byte, 0, 1024)
	last := 0
	for _, sp := range spans {
		out = append(out, body[last:sp.from]...)
		out = append(out, '"')
		out = append(out, Omitted...)
		out = strconv.AppendInt(out, int64(sp.to-sp.from-2), 10)
		out = append(out, '"')
		last = sp.to
	}
	return append(out, body[last:]...)
}

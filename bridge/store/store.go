// Package store keeps the bridge's durable session transcripts: for every
// session, an append-only file of what the editor saw (prompts, every
// session/update, stop reasons, the agent that served it) under a state
// directory, so that sessions can be listed, loaded and resumed whatever the
// agent behind them remembers. A run of text chunks of one of the
// protocol's chunk kinds is kept as one chunk holding their text
// (Lines.TextChunk).
//
// # Layout
//
// One <name>.ndjson transcript per session, a <name>.json sidecar holding
// its listing data (id, cwd, title, agent, backend session, timestamps),
// rewritten atomically (temporary file and rename), and, while a process
// holds the session, a <name>.lock. <name> is the session id when it is a
// plain file name, else "x-" and its hex, else (an id too long for that)
// "h-" and the hex of its SHA-256; the sidecar keeps the real id. Every
// file is opened with O_NOFOLLOW and the listing skips anything but
// regular files: nothing is read or written through a symbolic link
// planted in the directory. Files are created 0600.
//
// The state directory is created 0700 when missing; an existing one keeps
// its mode (a shared 1777 directory keeps its sticky bit) and is refused
// when another user owns it. DefaultDir without HOME falls back to a
// directory of the user's own in the temporary directory, refused if it is
// someone else's or open to others.
//
// # Ownership
//
// Several bridge processes (one per editor window) may share a state
// directory; a session is written by one Store at a time. Create claims a
// new session id (its transcript is created exclusively: ErrTaken when the
// id was ever recorded, by anyone), Acquire an existing one (BusyError when
// another process holds it), Release gives it up. The claim is an flock on
// the session's lock file, which holds the holder's pid (for BusyError) and
// which the kernel drops with the process, so a bridge killed leaves
// nothing stale. On systems without flock (Windows, Solaris…) sessions are
// exclusive between the Stores of one process only. Records for a session
// the Store does not hold are dropped and counted (Unowned), never written:
// they create no file, and nothing late for a session recreates it once
// Deleted. Delete refuses a session another process holds.
//
// # Writing
//
// Writing never blocks the caller: Append copies the record into a queue
// bounded by bytes (a Lines gathers a stream's updates without even a lock
// per update), and one writer goroutine of the Store's own encodes it and
// hands it to the OS; a session's file is fsynced, and its sidecar
// rewritten, at every turn end (a Record with Sync set) and every file at
// least once a second, by a second goroutine, so that a slow fsync never
// holds the writer up. When the queue is full (a disk far slower than the
// agent's stream) records are dropped and counted rather than stall the
// relay; the session's transcript then gets a gap record
// {"dropped":N} where they were lost, so that nobody mistakes it for
// complete.
//
// A write that fails or is cut short (a full disk, an I/O error) is
// undone: the transcript is truncated back to its last whole line (if even
// that fails, the next record starts on a new line), the records lost are
// counted, and the first write that works again is preceded by a gap
// record {"lost":N,"cause":"..."}. Each episode is logged once.
//
// A process killed in the middle of a turn leaves the turn open (a
// prompt record and no stop) and its lock file behind: Acquire, taking
// such a session, appends a gap record {"interrupted":true,"cause":"..."}
// (interrupted.go). The
// engine sends the editor none of a turn's updates before its prompt
// record is written, so that every update the editor received is in the
// transcript or behind such a record.
//
// # Reading
//
// Read streams a transcript back with memory bounded by its largest
// record, whatever its size; Load reads it whole. Reading is tolerant: a
// torn line (a crash in the middle of a write) and any undecodable line
// are skipped and counted, never an error, and invalid UTF-8 is replaced
// by U+FFFD.
//
// # Bounds
//
// Binary payloads ("data" and "blob" strings, i.e. image, audio and
// resource blobs) longer than MaxInline are not stored: the string becomes
// "acp-bridge:omitted:N" (N its length; see Omitted). A transcript that
// reaches MaxSessionBytes takes no more records except its metadata, agent
// switches and backend changes (one "cap" record marks the spot). At Open,
// sessions not updated for MaxAge, and the oldest beyond MaxSessions, are
// deleted (never one another process holds), and again by a retention pass
// when a session is created, at most once per RetainEvery: the pass reads
// every session's listing data, so a burst of new sessions costs one pass,
// not one per session. Stores that share a Retention (serve's, one per
// connection) share that schedule: a burst of new connections costs one
// pass too.
package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/clock"
	"github.com/acp-bridge/acp-bridge/internal/wire"
	"github.com/hashicorp/go-hclog"
)

// Record kinds.
const (
	KindMeta   = "meta"   // Agent, Dialect, Cwd of a session opened or reopened
	KindPrompt = "prompt" // Body: the session/prompt params
	KindUpdate = "update" // Body: the session/update params sent to the editor, or the whole notification (Load gives the params)
	KindStop   = "stop"   // Body: the prompt's result, or its error object
	KindSwitch = "switch" // Agent, Dialect: the session moved to another agent
	KindGap    = "gap"    // Body: {"dropped":N}: records lost to a full queue; {"lost":N,"cause":"..."}: to failed writes
	KindCap    = "cap"    // the size cap was reached; later records dropped
	// KindBackend: Backend, Link: the agent-side session behind the
	// session changed.
	KindBackend = "backend"
)

// Record is one line of a transcript.
type Record struct {
	Kind    string          `json:"t"`
	At      time.Time       `json:"at,omitzero"`
	Agent   string          `json:"agent,omitempty"`
	Dialect string          `json:"dialect,omitempty"`
	Cwd     string          `json:"cwd,omitempty"`
	Backend string          `json:"backend,omitempty"`
	Link    string          `json:"link,omitempty"`
	Failed  bool            `json:"failed,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"`
	// U is the update member of a KindUpdate record stored short; Load
	// rebuilds Body from it.
	U json.RawMessage `json:"u,omitempty"`
	// Sync asks for the file to be flushed and fsynced once this record is
	// written (a turn's end). Not stored.
	Sync bool `json:"-"`
}

// Meta is a session's listing data (the sidecar file).
type Meta struct {
	SessionID string `json:"sessionId"`
	Cwd       string `json:"cwd"`
	Title     string `json:"title,omitempty"`
	Agent     string `json:"agent,omitempty"`
	Dialect   string `json:"dialect,omitempty"`
	// Backend is the agent's own id of the session behind this one, and
	// Link "shared" or "own": whether that backend session lives on the
	// agent link the bridge shares between sessions or on a link of its
	// own.
	Backend   string    `json:"backend,omitempty"`
	Link      string    `json:"link,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
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
	// RetainEvery is the least time between two retention passes that
	// creating sessions makes (MaxAge, MaxSessions, tombstones); 0 means a
	// minute, negative means a pass at every creation.
	RetainEvery time.Duration
	// Retention, when set, is shared by the Stores of one process on one
	// directory (serve opens one per connection): a pass at Open, or at a
	// creation, is made only when none of them made one within
	// RetainEvery, so a new connection costs no pass over the directory.
	// nil: the Store's own, and Open always makes a pass.
	Retention *Retention
	// FS holds the transcripts and sidecars; nil means the operating
	// system's.
	FS     FS
	Logger hclog.Logger
}

// DefaultDir is $XDG_STATE_HOME/acp-bridge, else ~/.local/state/acp-bridge,
// else (no home directory) $TMPDIR/acp-bridge-<uid>, which Open refuses
// unless it is the user's own and closed to others.
func DefaultDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "acp-bridge")
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return tempDir()
	}
	return filepath.Join(home, ".local", "state", "acp-bridge")
}

// tempDir is the state directory of a user without a home directory.
func tempDir() string { return filepath.Join(os.TempDir(), "acp-bridge-"+uid()) }

// openDir creates dir (0700) when missing and checks an existing one; it
// never changes an existing directory's mode.
func openDir(dir string) error {
	private := filepath.Clean(dir) == tempDir()
	stat := os.Stat
	if private {
		stat = os.Lstat // at a predictable path: not through a link
	}
	st, err := stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating the session state directory: %w", err)
		}
		st, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("the session state directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("the session state directory %s is not a directory (mode %v)", dir, st.Mode())
	}
	return checkOwner(dir, st, private)
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
	// prompted is set by the first prompt record, streamed once a
	// stream's records have come after it: the arenas are then
	// stream-sized (streamArena).
	prompted, streamed bool

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
	fs FS

	// held are the sessions this Store holds (Create, Acquire) and has not
	// Released or Deleted; releasing counts the Releases and Deletes the
	// writer has not run yet (the lock is still taken).
	held      map[string]*claim
	releasing map[string]int
	unowned   int64 // records dropped: their session is not held

	retention *Retention

	// writer-owned
	owned map[string]*claim // as held, in the writer's order
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

// claim is a session this Store holds.
type claim struct {
	lock *lock
}

type file struct {
	f      File
	pend   []byte // encoded records not yet written (one write per batch)
	meta   Meta
	size   int64 // written and pending: what the size cap counts
	capped bool
	dirty  bool // written since the last fsync
	metaD  bool // meta changed since the sidecar was written
	// titled is closed once a sidecar holding the session's first title
	// is written, which the syncer is asked for as soon as the title is
	// set (the turn's first prompt); nil when there is nothing to wait
	// for. A Written barrier waits for it: other windows list by the
	// sidecar.
	titled chan struct{}

	// end is the size on disk, whole lines only (a failed write is
	// truncated back to it); torn says the file may end in a partial line
	// all the same, so that the next write starts a new one.
	end  int64
	torn bool
	// lost counts the records lost to failed writes since the last write
	// that worked; cause is the last failure.
	lost  int
	cause string

	// jobs counts the syncer's jobs for this file not yet done: the
	// writer waits for them before it closes the file (file.close).
	jobs sync.WaitGroup
	// The job waiting in the syncer's queue, if any (syncer.mu).
	queued             bool
	needSync, needMeta bool
	snap               Meta          // the listing data to write
	snapTitled         chan struct{} // closed once snap is written
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
	if o.RetainEvery == 0 {
		o.RetainEvery = time.Minute
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.FS == nil {
		o.FS = osFS{}
	}
	if err := openDir(o.Dir); err != nil {
		return nil, err
	}
	s := &Store{o: o, log: o.Logger, fs: o.FS, dropped: map[string]int{}, wake: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
		done: make(chan struct{}), files: map[string]*file{},
		held: map[string]*claim{}, releasing: map[string]int{}, owned: map[string]*claim{}}
	s.handOff = min(o.QueueBytes/4, handOffBytes)
	s.arena = make([]byte, 0, idleArena)
	s.sy = syncer{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.retention = o.Retention
	if s.retention == nil {
		s.retention = &Retention{}
	}
	if s.retainDue() {
		s.retain("")
	}
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

// Unowned returns how many records were dropped because their session is
// not held by this Store.
func (s *Store) Unowned() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unowned
}

// structural says whether records of kind describe the session rather
// than its conversation: they are kept past a full queue and the size cap.
func structural(kind string) bool {
	return kind == KindMeta || kind == KindSwitch || kind == KindBackend
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
	s.streamArena()
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
	n   int // updates in buf
	// open is the kind of the last record in buf when that record is a
	// chunk of text a next one of its kind may join (see TextChunk), ""
	// otherwise. It never shares the caller's memory.
	open string
}

// linesBytes is the most a Lines holds before it hands its records over.
const linesBytes = 32 << 10

// Lines returns a new Lines for s.
func (s *Store) Lines() *Lines { return &Lines{s: s} }

// Update is AppendUpdate through l.
func (l *Lines) Update(sid string, body []byte) { l.add(sid, body, linePrefix) }

// SessionUpdate is AppendSessionUpdate through l.
func (l *Lines) SessionUpdate(sid string, update []byte) { l.add(sid, update, shortPrefix) }

// TextChunk is SessionUpdate for an update the caller knows to be exactly
// {"sessionUpdate":"KIND","content":{"type":"text","text":"TEXT"}}, with
// no white space and no other member, and KIND without escapes. A run of
// such chunks of one of the protocol's chunk kinds (whose texts add up),
// one after the other in l, is kept as one record whose text is theirs
// joined: what a session/load replays shows the same text, and a
// stream's transcript takes half the bytes (the text instead of the whole
// update), written and fsynced for every update. Joining two JSON
// strings' insides gives one valid inside. An update of any other kind
// is kept as it came: what its text means is not the store's to know.
func (l *Lines) TextChunk(sid string, update []byte, kind string) {
	textAt := len(chunkOpening) + len(kind) + len(chunkContent)
	// (A stream's callers pass the same strings each time: the comparisons
	// are of their pointers.)
	if l.open != "" && kind == l.open && sid == l.sid && len(update) > textAt+len(chunkEnd) {
		// The last record's closing ("}} of the update, } of the
		// record, the newline) makes way for this text and its own.
		l.buf = append(append(l.buf[:len(l.buf)-len(chunkEnd)-2], update[textAt:]...), "}\n"...)
		l.n++
		if len(l.buf) >= linesBytes {
			l.Flush()
		}
		return
	}
	l.add(sid, update, shortPrefix)
	if len(l.buf) > 0 { // still there: not handed over, not too large
		l.open = chunkKind(kind)
	}
}

// chunkKind is kind as the constant when it is one of the protocol's
// chunk kinds, whose texts add up; "" otherwise. (The constant: kind may
// share its caller's memory.)
func chunkKind(kind string) string {
	switch kind {
	case "agent_message_chunk":
		return "agent_message_chunk"
	case "agent_thought_chunk":
		return "agent_thought_chunk"
	case "user_message_chunk":
		return "user_message_chunk"
	}
	return ""
}

// The parts of a text chunk's update around its kind and its text.
const (
	chunkOpening = `{"sessionUpdate":"`
	chunkContent = `","content":{"type":"text","text":"`
	chunkEnd     = `"}}`
)

func (l *Lines) add(sid string, body []byte, prefix string) {
	l.open = ""
	if l.buf == nil {
		// Made for a run whole: growing it cost a first turn 120 KB of
		// fresh memory.
		l.buf = make([]byte, 0, linesBytes+linesBytes/4)
	}
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
		s.streamArena()
		k, first := s.linesOp(l.sid)
		s.arena = append(s.arena, l.buf...)
		s.queued(k, len(l.buf), first)
	} else {
		s.mu.Unlock()
	}
	l.buf, l.n, l.open = l.buf[:0], 0, ""
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

// quote is s as a JSON string, quotes included.
func quote(s string) []byte { return wire.AppendString(nil, s) }

// admit decides whether records (n bytes in all) fit the queue, counting
// them dropped when they do not; s.mu is held.
func (s *Store) admit(sid, kind string, n, records int) bool {
	if s.closed {
		return false
	}
	if s.held[sid] == nil {
		// Not ours to write (never opened here, Released, Deleted): a
		// record must not create a session nor recreate a deleted one.
		before := s.unowned
		s.unowned += int64(records)
		if before&(before-1) == 0 { // 0, 1, 2, 4, …: not once per update
			s.log.Debug("record for a session this process does not hold dropped", "session", sid, "kind", kind, "dropped", s.unowned)
		}
		return false
	}
	if s.bytes+n > s.o.QueueBytes && s.bytes > 0 && !structural(kind) {
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
	s.prompted = s.prompted || kind == KindPrompt
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

// Written runs fn on the writer goroutine once every record queued before
// the call has been handed to the operating system (a kill -9 of this
// process can no longer lose it; a machine crash still can until the next
// fsync), and once a session's first title is in its sidecar, where other
// processes list it. A closed Store runs fn at once. fn must not call
// back into the Store synchronously.
func (s *Store) Written(fn func()) { s.written(fn, true) }

// Handed is Written without the wait for titles: fn runs once every
// record queued before the call has been handed to the operating system.
func (s *Store) Handed(fn func()) { s.written(fn, false) }

func (s *Store) written(fn func(), titles bool) {
	if !s.do(func() {
		var titled []chan struct{}
		for sid, f := range s.files {
			if len(f.pend) > 0 {
				s.writeOut(sid, f)
			}
			if titles && f.titled != nil {
				titled = append(titled, f.titled)
				f.titled = nil
			}
		}
		for _, c := range titled {
			// Asked for when the title was set, at the turn's start:
			// written long since, but for the shortest turns.
			<-c
		}
		fn()
	}) {
		fn()
	}
}

// handOffBytes is the most a stream queues before the writer is woken.
const handOffBytes = 256 << 10

// idleArena is the arenas' size until a turn's stream comes (streamArena).
const idleArena = 4 << 10

// streamArena makes the queue's arena stream-sized when a stream's first
// records come in a turn (after a prompt record); s.mu is held. A stream
// is handed to the writer in blocks that stay in the CPU's cache (copying
// into a cold multi-megabyte arena cost the relay more than the copy
// itself), and the two arenas the Store and its writer swap are sized for
// a block, so that neither grows while streaming. Single records (a
// session's creation) and the updates an agent sends before the first
// prompt (its commands) leave them small: an idle bridge keeps its
// footprint.
func (s *Store) streamArena() {
	if !s.streamed && s.prompted {
		s.streamed = true
		s.arena = append(make([]byte, 0, s.streamArenaSize()), s.arena...)
	}
}

// streamArenaSize is a stream-sized arena's capacity: a hand-off's worth
// and the run of records (at most linesBytes) that may take it past.
func (s *Store) streamArenaSize() int { return s.handOff + s.handOff/2 }

// batchDelay is how long the writer lets records gather once the queue is
// no longer empty: a bridge killed loses at most that much of a stream.
const batchDelay = 10 * time.Millisecond

// recordOverhead is what a queued record costs besides its body (the
// Record and its queue slot), counted against Options.QueueBytes.
const recordOverhead = 128

// ErrClosed is reported to callbacks of a Store that was closed.
var ErrClosed = errors.New("the session store is closed")

// Load reads session sid back whole, after everything queued for it is
// written, and passes it to done (on the writer goroutine). A session the
// store does not have is reported with an error wrapping fs.ErrNotExist.
func (s *Store) Load(sid string, done func(*Transcript, error)) {
	s.Read(sid, func(r *Reader, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		defer r.Close()
		done(r.All())
	})
}

// Read opens session sid for reading once everything queued for it
// before the call is written, and passes done (on the writer goroutine)
// a Reader of the records written so far. done must Close it, and may
// hand it to another goroutine to read: the writer does not wait for it.
func (s *Store) Read(sid string, done func(*Reader, error)) {
	if !s.do(func() { done(s.read(sid)) }) {
		done(nil, ErrClosed)
	}
}

// List passes done the sessions whose cwd is cwd ("" for all) and whose
// agent is agent ("" for all), newest first, at most limit of them after
// cursor, and the cursor of the next page ("" when there is none).
func (s *Store) List(cwd, agent, cursor string, limit int, done func([]Meta, string, error)) {
	if !s.do(func() { done(s.list(cwd, agent, cursor, limit)) }) {
		done(nil, "", ErrClosed)
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

// Close writes and fsyncs everything queued, releases every session and
// stops the writer.
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
	arena := make([]byte, 0, idleArena) // as Open made s.arena
	streamSized := false                // arena is (see streamArena)
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
		if s.streamed && !streamSized {
			// The arena handed back must be stream-sized too.
			arena, streamSized = make([]byte, 0, s.streamArenaSize()), true
		}
		batch, s.queue = s.queue, batch[:0]
		arena, s.arena = s.arena, arena[:0]
		s.bytes = 0
		s.mu.Unlock()
		s.now = clock.Now()
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
				s.mu.Lock()
				for sid, c := range s.owned {
					c.lock.release()
					delete(s.owned, sid)
					delete(s.held, sid)
				}
				s.mu.Unlock()
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
			// A large prompt passed: do not keep its memory.
			arena, streamSized = nil, false
		}
		// Hand each batch to the OS at once: a bridge killed now loses
		// nothing it wrote (a machine that crashes loses up to a second).
		for sid, f := range s.files {
			if len(f.pend) > 0 {
				s.writeOut(sid, f)
			}
		}
	}
}

// maxName is the longest file name the Store makes (NAME_MAX on most
// file systems).
const maxName = 255

// name is the file name stem of session sid: sid itself when it is a
// plain name, else "x-" and its hex, else (too long for that) "h-" and
// its SHA-256's. The first two are what every earlier version wrote.
func name(sid string) string {
	plain := sid != "" && len(sid) <= 100 && sid[0] != '.' && strings.IndexFunc(sid, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
	if plain && !strings.HasPrefix(sid, "x-") {
		return sid
	}
	if len("x-")+hex.EncodedLen(len(sid))+len(".ndjson") <= maxName {
		return "x-" + hex.EncodeToString([]byte(sid))
	}
	h := sha256.Sum256([]byte(sid))
	return "h-" + hex.EncodeToString(h[:])
}

// regular reports whether path is a regular file (not followed if a link).
func (s *Store) regular(path string) bool {
	st, err := s.fs.Lstat(path)
	return err == nil && st.Mode().IsRegular()
}

func (s *Store) paths(sid string) (transcript, sidecar string) {
	n := name(sid)
	return filepath.Join(s.o.Dir, n+".ndjson"), filepath.Join(s.o.Dir, n+".json")
}

// open returns the open file of sid, a session this Store holds; a
// transcript missing or not a regular file is an error: the writer never
// creates one (Create does).
func (s *Store) open(sid string) (*file, error) {
	if f := s.files[sid]; f != nil {
		return f, nil
	}
	if s.owned[sid] == nil {
		return nil, errNotOwned
	}
	tp, _ := s.paths(sid)
	fh, err := s.fs.OpenFile(tp, os.O_RDWR|os.O_APPEND|noFollow, 0)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (mode %v)", tp, st.Mode())
	}
	if err != nil {
		fh.Close()
		return nil, err
	}
	m, err := s.meta(sid)
	fresh := err != nil
	if fresh {
		m = Meta{SessionID: sid, CreatedAt: s.now, UpdatedAt: s.now}
	}
	f := &file{f: fh, meta: m, size: st.Size(), end: st.Size(), metaD: fresh}
	if f.end > 0 {
		// A bridge that stopped in the middle of a write left a partial
		// line: the next record must not be glued onto it.
		var last [1]byte
		if _, err := fh.ReadAt(last[:], f.end-1); err != nil || last[0] != '\n' {
			f.torn = true
		}
	}
	s.track(sid, f)
	return f, nil
}

// track adds f to the open files, closing them all first when there are
// too many.
func (s *Store) track(sid string, f *file) {
	f.capped = f.size >= s.o.MaxSessionBytes
	if len(s.files) >= 64 {
		s.flushAll()
		for id, g := range s.files {
			g.close()
			delete(s.files, id)
		}
	}
	s.files[sid] = f
}

var errNotOwned = errors.New("the session is not held by this process")

// drop counts a record the writer could not write for want of a file.
func (s *Store) drop(sid string, err error) {
	if errors.Is(err, errNotOwned) {
		s.mu.Lock()
		s.unowned++
		s.mu.Unlock()
		return
	}
	s.log.Warn("session transcript not written", "session", sid, "error", err)
}

// write encodes one record into sid's file.
func (s *Store) write(sid string, r *Record) {
	f, err := s.open(sid)
	if err != nil {
		s.drop(sid, err)
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
	case KindBackend:
		f.meta.Backend, f.meta.Link = r.Backend, r.Link
		f.metaD = true
	case KindPrompt:
		if f.meta.Title == "" {
			f.meta.Title = Title(r.Body)
			f.metaD = f.meta.Title != ""
			if f.metaD {
				// Written now rather than when the turn ends: the
				// barrier at its end (Written) would wait for the
				// sidecar, behind an fsync of all the turn wrote.
				f.titled = make(chan struct{})
				s.sy.addTitled(sid, f, false, true, f.titled)
			}
		}
	}
	if f.capped && !structural(r.Kind) {
		return
	}
	start := len(f.pend)
	f.pend = s.encode(f.pend, r)
	if !f.capped && f.size+int64(len(f.pend)-start) > s.o.MaxSessionBytes && !structural(r.Kind) {
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
	f, err := s.open(sid)
	if err != nil {
		s.drop(sid, err)
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
		s.writeOut(sid, f)
	}
	s.put(sid, f, lines)
	f.size = f.end
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
	for _, f := range [...]struct{ k, v string }{{"agent", r.Agent}, {"dialect", r.Dialect}, {"cwd", r.Cwd}, {"backend", r.Backend}, {"link", r.Link}} {
		if f.v != "" {
			b = append(b, `,"`+f.k+`":`...)
			b = wire.AppendString(b, f.v)
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
func (s *Store) writeOut(sid string, f *file) {
	s.put(sid, f, f.pend)
	f.size = f.end
	f.pend = f.pend[:0]
	if cap(f.pend) > 1<<20 {
		f.pend = nil // a large record passed: do not keep its memory
	}
}

// put writes whole lines b to f. A write that fails or is cut short is
// undone back to the last whole line it wrote and the records it held
// are counted lost; the next write that works starts with a gap record
// that says how many (and, if the file could not be truncated, on a
// line of its own).
func (s *Store) put(sid string, f *file, b []byte) {
	if len(b) == 0 {
		return
	}
	var head int // bytes of b before the caller's: the newline and gap record
	if f.torn || f.lost > 0 {
		var pre []byte
		if f.torn {
			pre = append(pre, '\n')
		}
		if f.lost > 0 {
			body := fmt.Appendf(nil, `{"lost":%d,"cause":%s}`, f.lost, quote(f.cause))
			pre = s.encode(pre, &Record{Kind: KindGap, At: s.now, Body: body})
		}
		head = len(pre)
		b = append(pre, b...) // a copy, on recovery only
	}
	n, err := f.f.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		if f.lost > 0 {
			s.log.Info("session transcript written again; a gap record marks the records lost", "session", sid, "lost", f.lost)
		}
		f.end += int64(n)
		f.torn, f.lost, f.cause = false, 0, ""
		return
	}
	n = max(n, 0)
	keep := bytes.LastIndexByte(b[:n], '\n') + 1 // whole lines written
	if keep > 0 {
		f.torn = false
	}
	if keep >= head {
		f.lost = 0 // the gap record went out
	}
	f.lost += bytes.Count(b[max(keep, head):], []byte{'\n'})
	if n > keep {
		if terr := f.f.Truncate(f.end + int64(keep)); terr != nil {
			f.torn = true
			f.end += int64(n)
			err = fmt.Errorf("%w; undoing the partial line failed too: %v", err, terr)
		} else {
			f.end += int64(keep)
		}
	} else {
		f.end += int64(keep)
	}
	if f.cause == "" {
		s.log.Warn("session transcript write failed: records are lost until a write works again (a gap record will mark them); free disk space or check the disk",
			"session", sid, "error", err)
	}
	f.cause = err.Error()
}

// flush writes sid's buffer, fsyncs it and rewrites its sidecar if needed.
//
// The fsync and the sidecar are the syncer's: an fsync can take the disk's
// time to write out everything the stream wrote, and the writer must keep
// taking records meanwhile or the queue fills and records are dropped.
func (s *Store) flush(sid string, f *file) {
	var sync, meta bool
	if f.dirty {
		s.writeOut(sid, f)
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
// written. The writer waits for a file's jobs before it closes, releases
// or deletes it, so that no sidecar is written after.
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
func (y *syncer) add(sid string, f *file, sync, meta bool) { y.addTitled(sid, f, sync, meta, nil) }

// addTitled is add, closing titled (if not nil) once the sidecar is
// written; meta must be set with it.
func (y *syncer) addTitled(sid string, f *file, sync, meta bool, titled chan struct{}) {
	y.mu.Lock()
	if titled != nil {
		f.snapTitled = titled
	}
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
			sync, meta, snap, titled := f.needSync, f.needMeta, f.snap, f.snapTitled
			f.queued, f.needSync, f.needMeta, f.snapTitled = false, false, false, nil
			y.mu.Unlock()
			if sync {
				if err := f.f.Sync(); err != nil {
					s.log.Warn("session transcript fsync failed", "session", j.sid, "error", err)
				}
			}
			if meta {
				if err := s.writeMeta(j.sid, snap); err != nil {
					s.log.Warn("session listing data not written (the last written is kept)", "session", j.sid, "error", err)
				}
			}
			if titled != nil {
				close(titled)
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

// writeMeta replaces sid's sidecar with m, atomically: a failure leaves
// the last one written.
func (s *Store) writeMeta(sid string, m Meta) error {
	_, mp := s.paths(sid)
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var tmp string
	var f File
	for range 10 {
		tmp = filepath.Join(s.o.Dir, fmt.Sprintf(".meta-%d-%x", os.Getpid(), rand.Uint64()))
		f, err = s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	n, err := f.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, mp)
	}
	if err != nil {
		s.fs.Remove(tmp)
	}
	return err
}

// meta returns sid's listing data, from the open file or the sidecar.
func (s *Store) meta(sid string) (Meta, error) {
	if f := s.files[sid]; f != nil {
		return f.meta, nil
	}
	_, mp := s.paths(sid)
	m, err := s.readMeta(mp)
	if err == nil && m.SessionID != sid {
		return Meta{}, fmt.Errorf("%s: the listing data of another session (%q): %w", mp, m.SessionID, fs.ErrNotExist)
	}
	return m, err
}

// readMeta reads a sidecar, never through a link.
func (s *Store) readMeta(path string) (Meta, error) {
	var m Meta
	f, err := s.fs.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return m, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return m, err
	}
	if !st.Mode().IsRegular() || st.Size() > 1<<20 {
		return m, fmt.Errorf("%s: not a session listing file: %w", path, fs.ErrNotExist)
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(bytes.ToValidUTF8(b, []byte("\uFFFD")), &m); err != nil || m.SessionID == "" {
		return m, fmt.Errorf("%s: unreadable session listing data: %w", path, fs.ErrNotExist)
	}
	return m, nil
}

// removeFiles removes sid's transcript and sidecar.
func (s *Store) removeFiles(sid string) error {
	if f := s.files[sid]; f != nil {
		f.close()
		delete(s.files, sid)
	}
	tp, mp := s.paths(sid)
	err1 := s.fs.Remove(mp)
	err2 := s.fs.Remove(tp)
	if err1 != nil && err2 != nil {
		return fmt.Errorf("no transcript of session %q: %w", sid, fs.ErrNotExist)
	}
	// A tombstone keeps the id from being handed out again: an editor
	// window that still remembers the deleted session must never load
	// another conversation under its id. Retention removes it after
	// MaxAge.
	if g, err := s.fs.OpenFile(s.gonePath(sid), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, 0o600); err == nil {
		g.Close()
	} else {
		s.log.Warn("deleted session's id not kept from reuse", "session", sid, "error", err)
	}
	return nil
}

// gonePath is the tombstone of a deleted session sid (see removeFiles).
func (s *Store) gonePath(sid string) string {
	return filepath.Join(s.o.Dir, name(sid)+goneSuffix)
}

const goneSuffix = ".gone"

// expireTombstones removes the tombstones of sessions deleted longer than
// MaxAge ago.
func (s *Store) expireTombstones(now time.Time) {
	if s.o.MaxAge <= 0 {
		return
	}
	ents, _ := s.fs.ReadDir(s.o.Dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), goneSuffix) || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && now.Sub(clock.FileTime(info.ModTime())) > s.o.MaxAge {
			s.fs.Remove(filepath.Join(s.o.Dir, e.Name()))
		}
	}
}

// all returns every session's listing data, newest first.
func (s *Store) all() []Meta {
	ents, _ := s.fs.ReadDir(s.o.Dir)
	var out []Meta
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") || !e.Type().IsRegular() {
			continue
		}
		m, err := s.readMeta(filepath.Join(s.o.Dir, n))
		if err != nil || name(m.SessionID)+".json" != n {
			continue
		}
		if f := s.files[m.SessionID]; f != nil {
			m = f.meta
		} else if tp, _ := s.paths(m.SessionID); !s.regular(tp) {
			// A transcript that is a directory, a FIFO or a symlink
			// cannot be loaded (Acquire): it is not listed either.
			continue
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

func (s *Store) list(cwd, agent, cur string, limit int) ([]Meta, string, error) {
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
		if agent != "" && m.Agent != agent {
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

// Retention is when the last retention pass was made, for the Stores that
// share it (Options.Retention). Its zero value has made none.
type Retention struct {
	mu   sync.Mutex
	last time.Time
	made bool
}

// retainDue reports whether a retention pass is to be made now (at Open,
// or for a session just created): none has been, or the last was at least
// RetainEvery ago; it counts the pass as made. Called from Open and the
// writer.
func (s *Store) retainDue() bool {
	r := s.retention
	now := clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.made && s.o.RetainEvery > 0 && now.Sub(r.last) < s.o.RetainEvery {
		return false
	}
	r.last, r.made = now, true
	return true
}

// retain deletes sessions beyond the age and count limits, never keep, one
// this Store holds, nor one another process holds.
func (s *Store) retain(keep string) {
	all := s.all()
	now := clock.Now()
	s.expireTombstones(now)
	n := 0
	if keep != "" && !slices.ContainsFunc(all, func(m Meta) bool { return m.SessionID == keep }) {
		n = 1 // a session just created has no listing data on disk yet
	}
	for _, m := range all {
		old := s.o.MaxAge > 0 && now.Sub(m.UpdatedAt) > s.o.MaxAge
		over := s.o.MaxSessions > 0 && n >= s.o.MaxSessions
		if m.SessionID != keep && s.owned[m.SessionID] == nil && (old || over) {
			if s.removeUnheld(m.SessionID) == nil {
				s.log.Debug("session transcript removed by retention", "session", m.SessionID, "updated", m.UpdatedAt)
				continue
			}
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

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
// per update, in blocks it hands over whole), and one writer goroutine of
// the Store's own encodes it and hands it to the OS; a session's file is
// fsynced, and its sidecar rewritten, at every turn end (a Record with
// Sync set) and every file at least once a second, by a second goroutine,
// so that a slow fsync never holds the writer up. When the queue is full
// (a disk far slower than the agent's stream) records are dropped and
// counted rather than stall the relay; the session's transcript then gets
// a gap record {"dropped":N} where they were lost, so that nobody
// mistakes it for complete.
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
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

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

	bytes int
	// handOff is the queued size at which the writer is woken at once.
	handOff int
	// blocks are Lines' blocks the writer has written, for the next;
	// blocksOut counts those queued or being written (see Lines.Flush).
	blocks    [][]byte
	blocksOut int
	dropped   map[string]int // per session, since the last gap record
	total     int64          // records ever dropped
	closed    bool
	wake      chan struct{} // the queue is no longer empty
	urgent    chan struct{} // write now: a turn ended, a read waits, Close
	done      chan struct{}

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
	sid, kind string // kind "" for fn and stop
	off, n    int    // the body: arena[off:off+n], or block[:n]
	// block is a Lines' own block of update lines (kindLines), handed
	// over whole rather than copied into the arena.
	block []byte
	extra *Record // the other fields of a record that has some
	fn    func()  // a read, list or delete, run in order with the writes
	stop  bool
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
	// touched says only UpdatedAt moved since the sidecar was written;
	// such a sidecar is rewritten at most once per metaEvery (metaAt is
	// when it last was), and when the file is closed.
	touched bool
	metaAt  time.Time
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

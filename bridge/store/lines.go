// Lines: a stream's update records gathered on the caller's goroutine,
// runs of text chunks merged, and handed to the queue as one block.

package store

import (
	"github.com/acp-bridge/acp-bridge/internal/wire"
)

// Lines gathers a run of update records on its caller's goroutine, with
// no lock, and hands them to the Store in one piece: per streamed update
// the caller pays one copy into a small block that stays in cache, the
// block itself goes to the writer, and the Store's lock is taken once per
// run. A Lines belongs to one goroutine.
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
		l.s.mu.Lock()
		l.buf = l.s.freeBlock()
		l.s.mu.Unlock()
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
//
// The block itself goes to the writer, which hands it back once written,
// and l takes a written one: a stream's records are copied once, into
// l's block, and the blocks are the same few all along. (Copied into the
// queue's arena instead, they were copied twice, and an arena the writer
// had not taken yet grew, each time into fresh memory: a first turn's
// page faults.) Past maxBlocks out at once, a block is copied into the
// arena as before, so that partly filled blocks cannot hold more memory
// than the queue's bound allows for.
func (l *Lines) Flush() {
	if l.n == 0 {
		return
	}
	s := l.s
	s.mu.Lock()
	switch {
	case !s.admit(l.sid, KindUpdate, len(l.buf), l.n):
		s.mu.Unlock()
	case s.blocksOut < s.maxBlocks():
		first := len(s.queue) == 0
		s.queue = append(s.queue, op{sid: l.sid, kind: kindLines, block: l.buf})
		s.blocksOut++
		n := len(l.buf)
		l.buf = s.freeBlock()
		s.queued(len(s.queue)-1, n, first)
	default:
		k, first := s.linesOp(l.sid)
		s.arena = append(s.arena, l.buf...)
		s.queued(k, len(l.buf), first)
	}
	l.buf, l.n, l.open = l.buf[:0], 0, ""
}

// blockBytes is a Lines' block's capacity: linesBytes and the record
// that takes it past.
const blockBytes = linesBytes + linesBytes/4

// keptBlocks is how many written blocks the writer keeps once a stream
// has paused (trimBlocks).
const keptBlocks = 2

// maxBlocks is the most blocks queued or being written at once: as many
// full ones as the queue's bound admits. s.mu is held.
func (s *Store) maxBlocks() int { return max(2, s.o.QueueBytes/linesBytes) }

// freeBlock returns an empty block, one the writer has written if any.
// s.mu is held.
func (s *Store) freeBlock() []byte {
	if n := len(s.blocks); n > 0 {
		b := s.blocks[n-1]
		s.blocks[n-1] = nil
		s.blocks = s.blocks[:n-1]
		return b
	}
	return make([]byte, 0, blockBytes)
}

// blocksWritten takes back the blocks the writer has written. Called by
// the writer.
func (s *Store) blocksWritten(bs [][]byte) {
	s.mu.Lock()
	s.blocksOut -= len(bs)
	for _, b := range bs {
		if cap(b) == blockBytes { // (one grown past it by a long record is let go)
			s.blocks = append(s.blocks, b[:0])
		}
	}
	s.mu.Unlock()
}

// trimBlocks lets go of the written blocks past keptBlocks: a stream's
// are kept while it goes on, not for good. Called by the writer.
func (s *Store) trimBlocks() {
	s.mu.Lock()
	if len(s.blocks) > keptBlocks {
		clear(s.blocks[keptBlocks:])
		s.blocks = s.blocks[:keptBlocks]
	}
	s.mu.Unlock()
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

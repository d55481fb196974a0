// The queue between Append's callers and the writer: admission against
// its byte bound (records dropped and counted when full), the arenas
// records are copied into, and waking the writer.

package store

import (
	"fmt"
	"time"
)

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
	if k < 0 || s.queue[k].kind != kindLines || s.queue[k].sid != sid || s.queue[k].block != nil {
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

// idleArena is the arenas' size as made. A stream's records pass in
// their Lines' blocks (Lines.Flush), so the arenas hold single records
// (a session's creation, a prompt, a turn's end) and grow only when a
// stream runs out of blocks.
const idleArena = 4 << 10

// batchDelay is how long the writer lets records gather once the queue is
// no longer empty: a bridge killed loses at most that much of a stream.
const batchDelay = 10 * time.Millisecond

// recordOverhead is what a queued record costs besides its body (the
// Record and its queue slot), counted against Options.QueueBytes.
const recordOverhead = 128

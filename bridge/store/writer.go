// The writer goroutine: it takes the queue's batches, encodes their
// records and writes them to the sessions' transcripts, undoing a write
// that fails and marking the loss with a gap record.

package store

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/clock"
	"github.com/acp-bridge/acp-bridge/internal/wire"
)

// run is the writer goroutine.
func (s *Store) run() {
	defer close(s.done)
	tick := time.NewTicker(s.o.FlushEvery)
	defer tick.Stop()
	var batch []op
	var written [][]byte                // Lines' blocks, handed back after the batch
	arena := make([]byte, 0, idleArena) // as Open made s.arena
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
			s.now = clock.Now()
			s.flushAll(false)
			s.trimBlocks()
			continue
		}
		s.mu.Lock()
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
				s.flushAll(true)
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
			case o.kind == kindLines && o.block != nil:
				s.writeLines(o.sid, o.block[:o.n])
				written = append(written, o.block)
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
		if len(written) > 0 {
			s.blocksWritten(written)
			clear(written)
			written = written[:0]
		}
		if cap(arena) > 2*s.o.QueueBytes {
			// A large prompt passed: do not keep its memory.
			arena = nil
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
	if r.Sync {
		s.flush(sid, f, false)
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
//
// A sidecar whose only change is UpdatedAt is rewritten at most once per
// metaEvery, and when final is set (the file is about to be closed): a
// stream used to rewrite it, fsync included, once a second and at every
// turn's end, for a date that only another process's listing reads.
func (s *Store) flush(sid string, f *file, final bool) {
	var sync, meta bool
	if f.dirty {
		s.writeOut(sid, f)
		f.dirty = false
		f.touched = true // updatedAt moved
		sync = true
	}
	if f.metaD || (f.touched && (final || s.now.Sub(f.metaAt) >= metaEvery)) {
		f.metaD, f.touched, f.metaAt = false, false, s.now
		meta = true
	}
	if sync || meta {
		s.sy.add(sid, f, sync, meta)
	}
}

// metaEvery is how often at most a session's sidecar is rewritten for its
// UpdatedAt alone: how stale another process's listing of a session open
// here may be.
const metaEvery = 30 * time.Second

// close closes f once the syncer is done with it.
func (f *file) close() {
	f.jobs.Wait()
	f.f.Close()
}

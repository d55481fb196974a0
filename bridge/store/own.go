package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/acp-bridge/acp-bridge/internal/clock"
)

// Create claims sid, a session id never recorded, for this Store: its
// transcript is created at once (exclusively, so that of two processes
// creating one id only one succeeds) and its lock taken. An error wrapping
// ErrTaken says the id is recorded already, here or by another process:
// the caller picks another. m is the new session's listing data
// (SessionID is set to sid; a zero CreatedAt is now).
func (s *Store) Create(sid string, m Meta) error {
	s.mu.Lock()
	closed, held := s.closed, s.held[sid] != nil
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if held {
		return fmt.Errorf("session %s: %w", sid, ErrTaken)
	}
	l, err := takeLock(lockPath(s.o.Dir, name(sid)), sid)
	if err != nil {
		if be := (*BusyError)(nil); errors.As(err, &be) {
			return fmt.Errorf("session %s is being recorded by another process (pid %d): %w", sid, be.PID, ErrTaken)
		}
		return err
	}
	if _, err := s.fs.Lstat(s.gonePath(sid)); err == nil {
		l.release()
		return fmt.Errorf("session %s was recorded and deleted: %w", sid, ErrTaken)
	}
	tp, _ := s.paths(sid)
	f, err := s.fs.OpenFile(tp, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		l.release()
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("session %s: %w", sid, ErrTaken)
		}
		return fmt.Errorf("session %s: creating its transcript: %w", sid, err)
	}
	m.SessionID = sid
	if m.CreatedAt.IsZero() {
		m.CreatedAt = clock.Now()
	}
	if m.UpdatedAt.Before(m.CreatedAt) {
		m.UpdatedAt = m.CreatedAt
	}
	// Listed before Create returns: another window's session/list right
	// after this session/new is answered shows it, and a bridge killed
	// before its first flush leaves no transcript nobody can find. Nothing
	// else writes this sidecar until the op below hands the file to the
	// writer.
	metaErr := s.writeMeta(sid, m)
	c := &claim{lock: l}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f.Close()
		s.fs.Remove(tp)
		_, mp := s.paths(sid)
		s.fs.Remove(mp)
		l.release()
		return ErrClosed
	}
	s.held[sid] = c
	s.queue = append(s.queue, op{fn: func() {
		s.owned[sid] = c
		s.track(sid, &file{f: f, meta: m, metaD: metaErr != nil})
		if metaErr != nil {
			s.log.Warn("session listing data not written; retried at the next flush", "session", sid, "error", metaErr)
		}
		if s.retainDue() {
			s.retain(sid)
		}
	}})
	s.mu.Unlock()
	signal(s.urgent)
	return nil
}

// Acquire claims sid, a session already recorded, for this Store (to load
// or resume it) and returns its listing data. The error wraps
// fs.ErrNotExist when there is no such session, and is a *BusyError when
// another process holds it, or this Store does and has not Released it.
// Not to be called from a Store callback.
func (s *Store) Acquire(sid string) (Meta, error) {
	for {
		s.mu.Lock()
		closed, held, releasing := s.closed, s.held[sid] != nil, s.releasing[sid] > 0
		s.mu.Unlock()
		switch {
		case closed:
			return Meta{}, ErrClosed
		case held:
			return Meta{}, &BusyError{SessionID: sid, PID: os.Getpid()}
		case releasing:
			s.barrier() // the writer still has the lock: let it go first
			continue
		}
		break
	}
	tp, mp := s.paths(sid)
	if _, err := s.fs.Lstat(tp); err != nil {
		if _, gerr := s.fs.Lstat(s.gonePath(sid)); gerr == nil {
			return Meta{}, fmt.Errorf("session %q: %w", sid, ErrDeleted)
		}
		return Meta{}, notFound(sid, err)
	}
	l, err := takeLock(lockPath(s.o.Dir, name(sid)), sid)
	if err != nil {
		return Meta{}, err
	}
	// Deleted by its last holder while we waited for the lock?
	st, err := s.fs.Lstat(tp)
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (mode %v): %w", tp, st.Mode(), fs.ErrNotExist)
	}
	if err != nil {
		l.release()
		return Meta{}, notFound(sid, err)
	}
	m, err := s.readMeta(mp)
	if err != nil || m.SessionID != sid {
		m = Meta{SessionID: sid}
	}
	// A holder that ended without letting go (killed) and left a turn
	// open at the transcript's end was interrupted in it (interrupted.go).
	cut := false
	if l.orphaned {
		if fh, err := s.fs.OpenFile(tp, os.O_RDONLY|noFollow, 0); err == nil {
			cut = interrupted(fh, st.Size())
			fh.Close()
		}
	}
	c := &claim{lock: l}
	s.mu.Lock()
	if s.closed || s.held[sid] != nil {
		closed := s.closed
		s.mu.Unlock()
		l.release()
		if closed {
			return Meta{}, ErrClosed
		}
		return Meta{}, &BusyError{SessionID: sid, PID: os.Getpid()}
	}
	s.held[sid] = c
	s.queue = append(s.queue, op{fn: func() {
		s.owned[sid] = c
		if cut {
			s.log.Warn("session transcript ends in the middle of a turn: the process that recorded it stopped (killed or crashed); a gap record marks what may be missing", "session", sid)
			s.write(sid, &Record{Kind: KindGap, At: s.now, Body: fmt.Appendf(nil, `{"interrupted":true,"cause":%s}`, quote(interruptedCause))})
		}
	}})
	s.mu.Unlock()
	signal(s.urgent)
	return m, nil
}

func notFound(sid string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no transcript of session %q: %w", sid, fs.ErrNotExist)
	}
	return fmt.Errorf("session %q: %w", sid, err)
}

// Release gives sid up once everything queued for it is written; records
// for it after the call are dropped. A session this Store does not hold
// is ignored.
func (s *Store) Release(sid string) {
	s.mu.Lock()
	c := s.held[sid]
	if c == nil || s.closed {
		s.mu.Unlock()
		return
	}
	delete(s.held, sid)
	s.releasing[sid]++
	s.queue = append(s.queue, op{fn: func() { s.disown(sid, c, false) }})
	s.mu.Unlock()
	signal(s.urgent)
}

// Holds reports whether this Store holds sid (Create or Acquire, not yet
// Released or Deleted).
func (s *Store) Holds(sid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[sid] != nil
}

// Taken reports whether sid is recorded or claimed, by this Store or any
// other: an id Create would refuse.
func (s *Store) Taken(sid string) bool {
	s.mu.Lock()
	held := s.held[sid] != nil
	s.mu.Unlock()
	if held {
		return true
	}
	tp, _ := s.paths(sid)
	_, err := s.fs.Lstat(tp)
	if errors.Is(err, fs.ErrNotExist) {
		_, err = s.fs.Lstat(s.gonePath(sid))
	}
	return !errors.Is(err, fs.ErrNotExist)
}

// Delete removes session sid's files once everything queued before is
// written; done gets an error wrapping fs.ErrNotExist when there were
// none, and a *BusyError when another process holds the session. A
// session this Store holds is released.
func (s *Store) Delete(sid string, done func(error)) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		done(ErrClosed)
		return
	}
	c := s.held[sid]
	if c != nil {
		delete(s.held, sid)
		s.releasing[sid]++
	}
	s.queue = append(s.queue, op{fn: func() {
		if c != nil {
			done(s.disown(sid, c, true))
			return
		}
		done(s.removeUnheld(sid))
	}})
	s.mu.Unlock()
	signal(s.urgent)
}

// disown closes sid's file (written and synced first unless it is being
// removed), removes its files when remove is set, and lets its lock go.
// Writer goroutine.
func (s *Store) disown(sid string, c *claim, remove bool) error {
	if f := s.files[sid]; f != nil {
		if !remove {
			s.flush(sid, f, true)
		}
		f.close() // after the syncer's jobs: no sidecar written after this
		delete(s.files, sid)
	}
	delete(s.owned, sid)
	var err error
	if remove {
		err = s.removeFiles(sid)
	}
	c.lock.release()
	s.mu.Lock()
	if s.releasing[sid]--; s.releasing[sid] <= 0 {
		delete(s.releasing, sid)
	}
	s.mu.Unlock()
	return err
}

// removeUnheld removes a session this Store does not hold, under its lock:
// a *BusyError when another process holds it. Writer goroutine.
func (s *Store) removeUnheld(sid string) error {
	l, err := takeLock(lockPath(s.o.Dir, name(sid)), sid)
	if err != nil {
		return err
	}
	defer l.release()
	return s.removeFiles(sid)
}

// barrier returns once the writer has run everything queued before it.
func (s *Store) barrier() {
	ch := make(chan struct{})
	if s.do(func() { close(ch) }) {
		<-ch
	}
}

// Deleting sessions and retention: removing a session's files, the
// tombstone that keeps its id from reuse, and the passes that delete
// sessions past MaxAge or beyond MaxSessions.

package store

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/clock"
)

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

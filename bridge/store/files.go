// A session's files: their names (plain, hex or hashed ids), and opening,
// tracking and dropping the transcripts the writer holds open.

package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

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
		s.flushAll(true)
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

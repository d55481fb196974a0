// The sidecar: a session's listing data, rewritten atomically, read back,
// and the title it takes from the first prompt.

package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

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

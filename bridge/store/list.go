// Listing: every session's listing data, newest first, in pages.

package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

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

// Package localfs serves the ACP file-system methods fs/read_text_file and
// fs/write_text_file from the local disk, confined to one directory. The engine
// uses it when the editor did not advertise the fs capabilities but the
// agent's dialect still asks for files (acp-spec.md §16: "only if the editor
// advertised the fs capability; else serve from disk"), with the session's
// cwd as the root.
//
// Confinement is checked twice. First every symbolic link on the path is
// resolved (for a path that does not exist yet, the links of its longest
// existing prefix), so that a path leaving the root is refused with an error
// wrapping ErrOutsideRoot that says where it leads. Then the file is opened
// through an os.Root on the resolved root, which refuses, at open time, any
// symlink swapped in after the check.
package localfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutsideRoot is wrapped by the error for a path that is, or resolves
// through symbolic links to, a place outside the root.
var ErrOutsideRoot = errors.New("path is outside the session directory")

// ErrNotAbsolute is wrapped by the error for a relative path: ACP requires
// absolute paths in fs requests (acp-spec.md §9, "path (abs)").
var ErrNotAbsolute = errors.New("path is not absolute")

// maxLinks bounds symbolic-link expansion, as the kernel's ELOOP does.
const maxLinks = 255

// Read returns the text of the file at path, like ACP fs/read_text_file.
// line is the 1-based first line to return (0 or 1 = from the start) and
// limit the most lines to return (0 = all). Lines keep their terminators, so
// CRLF content comes back byte for byte; a line past the end yields "".
// path must be absolute and must stay inside root after symbolic links are
// resolved. A missing file yields an error matching fs.ErrNotExist.
func Read(root, path string, line, limit int) (string, error) {
	if line < 0 || limit < 0 {
		return "", fmt.Errorf("localfs: read %s: negative line (%d) or limit (%d)", path, line, limit)
	}
	r, rel, err := confine(root, path)
	if err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, err)
	}
	defer r.Close()
	data, err := r.ReadFile(rel)
	if err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, unwrapPathError(err))
	}
	return sliceLines(string(data), line, limit), nil
}

// Write replaces the content of the file at path, like ACP
// fs/write_text_file, which must create the file if it is missing
// (acp-spec.md §9). Missing parent directories are created (mode 0755) as
// long as they are inside root; a new file gets mode 0644, an existing one
// keeps its mode. path must be absolute and must stay inside root after
// symbolic links are resolved: writing through a link that leads outside is
// refused.
func Write(root, path, content string) error {
	r, rel, err := confine(root, path)
	if err != nil {
		return fmt.Errorf("localfs: write %s: %w", path, err)
	}
	defer r.Close()
	if dir := filepath.Dir(rel); dir != "." {
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("localfs: write %s: %w", path, unwrapPathError(err))
		}
	}
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("localfs: write %s: %w", path, unwrapPathError(err))
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("localfs: write %s: %w", path, unwrapPathError(err))
	}
	return nil
}

// confine checks that path resolves to a place inside root and returns an
// os.Root on the resolved root together with the resolved path relative to
// it. The caller closes the Root.
func confine(root, path string) (*os.Root, string, error) {
	if !filepath.IsAbs(path) {
		return nil, "", ErrNotAbsolute
	}
	if !filepath.IsAbs(root) {
		return nil, "", fmt.Errorf("session directory %q is not absolute", root)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, "", fmt.Errorf("session directory: %w", unwrapPathError(err))
	}
	resolved, err := resolve(filepath.Clean(path))
	if err != nil {
		return nil, "", err
	}
	rel, err := filepath.Rel(realRoot, resolved)
	if err != nil || !filepath.IsLocal(rel) && rel != "." {
		if resolved != filepath.Clean(path) {
			return nil, "", fmt.Errorf("%w: it resolves to %s, outside %s", ErrOutsideRoot, resolved, root)
		}
		return nil, "", fmt.Errorf("%w %s", ErrOutsideRoot, root)
	}
	r, err := os.OpenRoot(realRoot)
	if err != nil {
		return nil, "", fmt.Errorf("session directory: %w", unwrapPathError(err))
	}
	return r, rel, nil
}

// resolve returns the absolute, clean path with every symbolic link in its
// longest existing prefix replaced by its target. Components after the first
// missing one are appended as they are: they cannot be links. Unlike
// filepath.EvalSymlinks it succeeds for a path that does not exist yet and
// follows a dangling link to where a write would create the file, which is
// what must be checked before a write.
func resolve(path string) (string, error) {
	vol := filepath.VolumeName(path)
	resolved := vol + string(filepath.Separator)
	rest := strings.Split(path[len(resolved):], string(filepath.Separator))
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{next}, rest...)...), nil
		}
		if err != nil {
			return "", unwrapPathError(err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("too many levels of symbolic links at %s", next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", unwrapPathError(err)
		}
		if filepath.IsAbs(target) {
			vol = filepath.VolumeName(target)
			resolved = vol + string(filepath.Separator)
			target = target[len(resolved):]
		}
		rest = append(strings.Split(target, string(filepath.Separator)), rest...)
	}
	return resolved, nil
}

// unwrapPathError drops the *fs.PathError layer, whose path is relative to
// the resolved root and would only confuse next to the path the agent asked
// for; the underlying errno still matches fs.ErrNotExist and friends.
func unwrapPathError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// sliceLines returns up to limit lines of s starting at the 1-based line,
// keeping line terminators. line 0 means 1, limit 0 means all.
func sliceLines(s string, line, limit int) string {
	for skip := line - 1; skip > 0; skip-- {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return ""
		}
		s = s[i+1:]
	}
	if limit == 0 {
		return s
	}
	end := 0
	for n := 0; n < limit; n++ {
		i := strings.IndexByte(s[end:], '\n')
		if i < 0 {
			return s
		}
		end += i + 1
	}
	return s[:end]
}

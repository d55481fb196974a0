// Package localfs serves the ACP file-system methods fs/read_text_file and
// fs/write_text_file from the local disk, confined to one directory. The engine
// uses it when the editor did not advertise the fs capabilities but the
// agent's dialect still asks for files (an acp-v0 agent's readTextFile and
// writeTextFile, docs/agent-protocols.md#acp-v0-mapping), with the session's
// cwd as the root.
//
// Confinement is checked twice. First every symbolic link on the path is
// resolved (for a path that does not exist yet, the links of its longest
// existing prefix), so that a path leaving the root is refused with an error
// wrapping ErrOutsideRoot that says where it leads. Then the file is opened
// through an os.Root on the resolved root, which refuses, at open time, any
// symlink swapped in after the check.
//
// Only regular files are served: a FIFO, a device or a socket in the session
// directory is refused (opened without blocking, then checked, so that a
// FIFO swapped in between cannot hang the bridge), and so is a file larger
// than the size cap.
package localfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file: a directory, a FIFO, a device, a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file, or content to write,
// larger than the size cap.
var ErrTooLarge = errors.New("larger than the size cap")

// DefaultMaxBytes is the size cap when a caller passes 0.
const DefaultMaxBytes = 64 << 20

// ErrOutsideRoot is wrapped by the error for a path that is, or resolves
// through symbolic links to, a place outside the root.
var ErrOutsideRoot = errors.New("path is outside the session directory")

// ErrNotAbsolute is wrapped by the error for a relative path: ACP requires
// absolute paths in fs requests (schema: ReadTextFileRequest.path).
var ErrNotAbsolute = errors.New("path is not absolute")

// maxLinks bounds symbolic-link expansion, as the kernel's ELOOP does.
const maxLinks = 255

// Read returns the text of the file at path, like ACP fs/read_text_file.
// line is the 1-based first line to return (0 or 1 = from the start) and
// limit the most lines to return (0 = all). Lines keep their terminators, so
// CRLF content comes back byte for byte; a line past the end yields "".
// path must be absolute and must stay inside root after symbolic links are
// resolved. A missing file yields an error matching fs.ErrNotExist; a file
// that is not regular, ErrNotRegular; one over maxBytes (0 means
// DefaultMaxBytes), ErrTooLarge. ctx is checked before each step.
func Read(ctx context.Context, root, path string, line, limit int, maxBytes int64) (string, error) {
	if line < 0 || limit < 0 {
		return "", fmt.Errorf("localfs: read %s: negative line (%d) or limit (%d)", path, line, limit)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, err)
	}
	r, rel, err := confine(root, path)
	if err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, err)
	}
	defer r.Close()
	// O_NONBLOCK: opening a FIFO with no writer would otherwise block for
	// good; for a regular file it changes nothing.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, unwrapPathError(err))
	}
	defer f.Close()
	if err := checkRegular(f, maxBytes); err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return "", fmt.Errorf("localfs: read %s: %w", path, unwrapPathError(err))
	}
	if int64(len(data)) > maxBytes { // it grew after the check
		return "", fmt.Errorf("localfs: read %s: %w (%d bytes)", path, ErrTooLarge, maxBytes)
	}
	return sliceLines(string(data), line, limit), nil
}

// checkRegular refuses what is not a regular file of at most maxBytes.
func checkRegular(f *os.File, maxBytes int64) error {
	fi, err := f.Stat()
	if err != nil {
		return unwrapPathError(err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w (it is a %s)", ErrNotRegular, kind(fi.Mode()))
	}
	if fi.Size() > maxBytes {
		return fmt.Errorf("%w: %d bytes, the cap is %d", ErrTooLarge, fi.Size(), maxBytes)
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// Write replaces the content of the file at path, like ACP
// fs/write_text_file, which must create the file if it is missing
// (ACP spec, File System). Missing parent directories are created (mode 0755) as
// long as they are inside root; a new file gets mode 0644, an existing one
// keeps its mode. path must be absolute and must stay inside root after
// symbolic links are resolved: writing through a link that leads outside is
// refused. So is writing to something that is not a regular file
// (ErrNotRegular), and content over maxBytes (ErrTooLarge; 0 means
// DefaultMaxBytes). ctx is checked before each step.
func Write(ctx context.Context, root, path, content string, maxBytes int64) error {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if int64(len(content)) > maxBytes {
		return fmt.Errorf("localfs: write %s: %w: %d bytes, the cap is %d", path, ErrTooLarge, len(content), maxBytes)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: write %s: %w", path, err)
	}
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
	if fi, err := r.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("localfs: write %s: %w (it is a %s)", path, ErrNotRegular, kind(fi.Mode()))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: write %s: %w", path, err)
	}
	// O_NONBLOCK: a FIFO swapped in after the check fails to open (no
	// reader) instead of blocking; the Stat below refuses anything else.
	f, err := r.OpenFile(rel, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("localfs: write %s: %w", path, unwrapPathError(err))
	}
	if err := checkRegular(f, 1<<62); err != nil {
		f.Close()
		return fmt.Errorf("localfs: write %s: %w", path, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
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

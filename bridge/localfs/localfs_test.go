package localfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes a temp dir holding a root directory "root" and a sibling
// "outside", with the links the tests walk through, and returns both.
//
//	root/a.txt            "one\ntwo\nthree\n"
//	root/crlf.txt         "x\r\ny\r\n"
//	root/sub/b.txt        "b"
//	root/in -> sub        (relative dir link staying inside)
//	root/abs -> <root>/sub/b.txt (absolute file link staying inside)
//	root/esc.txt -> ../outside/secret.txt   (file link escaping)
//	root/escdir -> <outside>                (dir link escaping)
//	root/dangling -> ../outside/new.txt     (dangling link escaping)
//	outside/secret.txt    "secret"
func tree(t *testing.T) (root, outside string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(base, "root")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(root, "a.txt"):         "one\ntwo\nthree\n",
		filepath.Join(root, "crlf.txt"):      "x\r\ny\r\n",
		filepath.Join(root, "sub", "b.txt"):  "b",
		filepath.Join(outside, "secret.txt"): "secret",
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"in":       "sub",
		"abs":      filepath.Join(root, "sub", "b.txt"),
		"esc.txt":  filepath.Join("..", "outside", "secret.txt"),
		"escdir":   outside,
		"dangling": filepath.Join("..", "outside", "new.txt"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

var ctx = context.Background()

func TestRead(t *testing.T) {
	root, outside := tree(t)
	tests := []struct {
		name        string
		path        string
		line, limit int
		want        string
		wantErr     error
	}{
		{name: "whole file", path: "a.txt", want: "one\ntwo\nthree\n"},
		{name: "from line 2", path: "a.txt", line: 2, want: "two\nthree\n"},
		{name: "line 1 is the start", path: "a.txt", line: 1, limit: 1, want: "one\n"},
		{name: "line 2 limit 1", path: "a.txt", line: 2, limit: 1, want: "two\n"},
		{name: "limit past end", path: "a.txt", line: 3, limit: 10, want: "three\n"},
		{name: "line past end", path: "a.txt", line: 9, want: ""},
		{name: "line just past last newline", path: "a.txt", line: 4, want: ""},
		{name: "crlf preserved", path: "crlf.txt", want: "x\r\ny\r\n"},
		{name: "crlf line 2", path: "crlf.txt", line: 2, limit: 1, want: "y\r\n"},
		{name: "no trailing newline", path: "sub/b.txt", limit: 5, want: "b"},
		{name: "dir link inside", path: "in/b.txt", want: "b"},
		{name: "absolute file link inside", path: "abs", want: "b"},
		{name: "dotdot staying inside", path: "sub/../a.txt", limit: 1, want: "one\n"},
		{name: "missing file", path: "nope.txt", wantErr: fs.ErrNotExist},
		{name: "missing dir", path: "nope/x.txt", wantErr: fs.ErrNotExist},
		{name: "dotdot escape", path: "../outside/secret.txt", wantErr: ErrOutsideRoot},
		{name: "file link escape", path: "esc.txt", wantErr: ErrOutsideRoot},
		{name: "dir link escape", path: "escdir/secret.txt", wantErr: ErrOutsideRoot},
		{name: "absolute elsewhere", path: filepath.Join(outside, "secret.txt"), wantErr: ErrOutsideRoot},
		{name: "dangling link escape", path: "dangling", wantErr: ErrOutsideRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if !filepath.IsAbs(path) {
				path = root + string(filepath.Separator) + filepath.FromSlash(path)
			}
			got, err := Read(ctx, root, path, tt.line, tt.limit, 0)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Read(%s) error = %v, want %v", tt.path, err, tt.wantErr)
				}
				if strings.Contains(got, "secret") {
					t.Fatalf("Read(%s) leaked %q", tt.path, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read(%s) error = %v", tt.path, err)
			}
			if got != tt.want {
				t.Errorf("Read(%s, %d, %d) = %q, want %q", tt.path, tt.line, tt.limit, got, tt.want)
			}
		})
	}
}

func TestRead_outsideErrorSaysWhere(t *testing.T) {
	root, outside := tree(t)
	_, err := Read(ctx, root, filepath.Join(root, "esc.txt"), 0, 0, 0)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(outside, "secret.txt")) ||
		!strings.Contains(err.Error(), "outside") {
		t.Errorf("error = %v, want it to name the link's target and say it is outside", err)
	}
}

func TestRead_relativePath(t *testing.T) {
	root, _ := tree(t)
	if _, err := Read(ctx, root, "a.txt", 0, 0, 0); !errors.Is(err, ErrNotAbsolute) {
		t.Errorf("Read(ctx, relative, 0) error = %v, want ErrNotAbsolute", err)
	}
	if err := Write(ctx, root, "a.txt", "x", 0); !errors.Is(err, ErrNotAbsolute) {
		t.Errorf("Write(ctx, relative, 0) error = %v, want ErrNotAbsolute", err)
	}
}

func TestRead_negative(t *testing.T) {
	root, _ := tree(t)
	if _, err := Read(ctx, root, filepath.Join(root, "a.txt"), -1, 0, 0); err == nil {
		t.Error("Read with line -1 succeeded")
	}
}

func TestRead_rootIsSymlink(t *testing.T) {
	root, _ := tree(t)
	link := filepath.Join(filepath.Dir(root), "rootlink")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	// The editor may name files through the link or through the real path.
	for _, path := range []string{filepath.Join(link, "a.txt"), filepath.Join(root, "a.txt")} {
		got, err := Read(ctx, link, path, 2, 1, 0)
		if err != nil || got != "two\n" {
			t.Errorf("Read(%s) = %q, %v; want %q", path, got, err, "two\n")
		}
	}
	if _, err := Read(ctx, link, filepath.Join(link, "esc.txt"), 0, 0, 0); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("escape through linked root: error = %v, want ErrOutsideRoot", err)
	}
	if err := Write(ctx, link, filepath.Join(link, "new", "n.txt"), "n", 0); err != nil {
		t.Fatalf("Write through linked root: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "new", "n.txt")); err != nil || string(b) != "n" {
		t.Errorf("written file = %q, %v", b, err)
	}
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		content string
		// check is the file (relative to root) that must then hold content.
		check   string
		wantErr error
	}{
		{name: "create", path: "new.txt", content: "hello\n", check: "new.txt"},
		{name: "truncate", path: "a.txt", content: "short", check: "a.txt"},
		{name: "crlf preserved", path: "w.txt", content: "a\r\nb\r\n", check: "w.txt"},
		{name: "empty content", path: "a.txt", content: "", check: "a.txt"},
		{name: "creates parent dirs", path: "d1/d2/x.txt", content: "x", check: "d1/d2/x.txt"},
		{name: "through inside dir link", path: "in/c.txt", content: "c", check: "sub/c.txt"},
		{name: "through inside file link", path: "abs", content: "B", check: "sub/b.txt"},
		{name: "dotdot escape", path: "../outside/x.txt", wantErr: ErrOutsideRoot},
		{name: "file link escape", path: "esc.txt", wantErr: ErrOutsideRoot},
		{name: "dir link escape", path: "escdir/secret.txt", wantErr: ErrOutsideRoot},
		{name: "dir link escape new file", path: "escdir/new/y.txt", wantErr: ErrOutsideRoot},
		{name: "dangling link escape", path: "dangling", wantErr: ErrOutsideRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, outside := tree(t)
			path := root + string(filepath.Separator) + filepath.FromSlash(tt.path)
			err := Write(ctx, root, path, tt.content, 0)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Write(%s) error = %v, want %v", tt.path, err, tt.wantErr)
				}
				if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "secret" {
					t.Errorf("outside file changed to %q", b)
				}
				for _, name := range []string{"new.txt", "x.txt", "new"} {
					if _, err := os.Lstat(filepath.Join(outside, name)); err == nil {
						t.Errorf("outside/%s was created", name)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Write(%s) error = %v", tt.path, err)
			}
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(tt.check)))
			if err != nil || string(b) != tt.content {
				t.Errorf("%s = %q, %v; want %q", tt.check, b, err, tt.content)
			}
		})
	}
}

func TestWrite_newFileMode(t *testing.T) {
	root, _ := tree(t)
	path := filepath.Join(root, "m.txt")
	if err := Write(ctx, root, path, "m", 0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// The umask may clear bits but never add any.
	if fi.Mode().Perm()&^0o644 != 0 {
		t.Errorf("mode = %v, want at most 0644", fi.Mode().Perm())
	}
}

func TestWrite_directory(t *testing.T) {
	root, _ := tree(t)
	if err := Write(ctx, root, filepath.Join(root, "sub"), "x", 0); err == nil {
		t.Error("Write onto a directory succeeded")
	}
}

func TestSliceLines(t *testing.T) {
	tests := []struct {
		s           string
		line, limit int
		want        string
	}{
		{"", 0, 0, ""},
		{"", 1, 1, ""},
		{"a", 0, 0, "a"},
		{"a", 2, 0, ""},
		{"a\n", 2, 0, ""},
		{"a\nb", 2, 0, "b"},
		{"a\nb", 1, 1, "a\n"},
		{"a\n\nb\n", 2, 1, "\n"},
		{"a\n\nb\n", 2, 2, "\nb\n"},
	}
	for _, tt := range tests {
		if got := sliceLines(tt.s, tt.line, tt.limit); got != tt.want {
			t.Errorf("sliceLines(%q, %d, %d) = %q, want %q", tt.s, tt.line, tt.limit, got, tt.want)
		}
	}
}

func TestReadWrite_ContextCancelled(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "a.txt")
	os.WriteFile(path, []byte("a"), 0o600)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(cancelled, root, path, 0, 0, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled ctx = %v", err)
	}
	if err := Write(cancelled, root, path, "b", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled ctx = %v", err)
	}
}

//go:build unix

package early

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		args, env []string
		want      []string
	}{
		{[]string{"acp-bridge", "--", "agent", "-x"}, nil, []string{"agent", "-x"}},
		{[]string{"acp-bridge", "--", "agent"}, []string{"HOME=/h", "PATH=/bin"}, []string{"agent"}},
		{[]string{"acp-bridge"}, nil, nil},
		{[]string{"acp-bridge", "--"}, nil, nil},
		{[]string{"acp-bridge", "--", ""}, nil, nil},
		{[]string{"acp-bridge", "--dialect", "acp-v0", "--", "agent"}, nil, nil},
		{[]string{"acp-bridge", "doctor", "--", "agent"}, nil, nil},
		{[]string{"acp-bridge", "--url", "ws://x"}, nil, nil},
		{[]string{"acp-bridge", "--", "agent"}, []string{"ACP_BRIDGE_DIALECT=acp-v0"}, nil},
		{[]string{"acp-bridge", "--", "agent"}, []string{"ACP_BRIDGE_NO_SESSIONS=1"}, nil},
		{[]string{"acp-bridge", "--", "agent"}, []string{"HOME=/a", "PATH=/bin", "HOME=/b"}, nil},
		{[]string{"acp-bridge", "--", "agent"}, []string{"HOME=/a", "NOEQUALS"}, nil},
		{[]string{"acp-bridge", "--", "agent"}, []string{"=x"}, nil},
		{[]string{"acp-bridge", "--", "agent"}, []string{"EMPTY=", "A=1=2"}, []string{"agent"}},
	} {
		got, ok := command(tc.args, tc.env)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("command(%q, %q) = %q, %v; want %q", tc.args, tc.env, got, ok, tc.want)
		}
	}
}

// lookPath finds what exec.LookPath finds, or reports that it cannot:
// over PATHs with absolute, relative, empty, repeated and unclean
// entries, and names found first in a directory, only in a relative one,
// as a directory or as a file that is not executable.
func TestLookPathAgreesWithExec(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if mode.IsDir() {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/agent", 0o755)
	mk("b/agent", 0o755)
	mk("b/only-b", 0o755)
	mk("a/plain", 0o644)
	mk("b/plain", 0o755)
	mk("a/isdir", os.ModeDir|0o755)
	mk("b/isdir", 0o755)
	mk("rel/relonly", 0o755)
	t.Chdir(root)
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	paths := []string{
		"", ":", a, a + ":" + b, b + ":" + a, a + "/:" + b, a + "//:" + b + "/.",
		"rel:" + a, a + ":rel", "::" + b, b + "::", "/nonexistent:" + b, a + "/../b",
	}
	names := []string{"agent", "only-b", "plain", "isdir", "relonly", "missing", "a/agent", "./rel/relonly", "/bin/sh", root + "/a/plain"}
	for _, p := range paths {
		t.Setenv("PATH", p)
		for _, name := range names {
			got, ok := lookPath(name)
			want, err := exec.LookPath(name)
			switch {
			case err != nil && ok:
				t.Errorf("PATH=%q: lookPath(%q) = %q; exec.LookPath fails: %v", p, name, got, err)
			case err == nil && !ok && !hasSlash(name):
				t.Errorf("PATH=%q: lookPath(%q) found nothing; exec.LookPath found %q", p, name, want)
			case err == nil && ok && got != want:
				t.Errorf("PATH=%q: lookPath(%q) = %q; exec.LookPath = %q", p, name, got, want)
			}
		}
	}
}

func hasSlash(s string) bool {
	for i := range len(s) {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// An agent started early is taken only as the command it was started
// as, once; one nothing took is killed and reaped by Discard.
func TestStartTakeDiscard(t *testing.T) {
	argv := []string{"sh", "-c", "exec sleep 30"}
	p := start(argv)
	if p == nil {
		t.Skip("no sh(1) to start")
	}
	mu.Lock()
	started = p
	mu.Unlock()
	env := os.Environ()
	path, _ := exec.LookPath("sh")
	for _, tc := range []struct {
		name      string
		path      string
		args, env []string
		dir       string
		group     bool
	}{
		{"other path", "/bin/false", argv, env, "", true},
		{"other arguments", path, []string{"sh", "-c", "exec sleep 31"}, env, "", true},
		{"other environment", path, argv, append(slices.Clone(env), "EXTRA=1"), "", true},
		{"a directory", path, argv, env, "/", true},
		{"no group of its own", path, argv, env, "", false},
	} {
		if got := Take(tc.path, tc.args, tc.env, tc.dir, tc.group); got != nil {
			t.Errorf("%s: Take returned the early agent", tc.name)
		}
	}
	if got := Take(path, argv, env, "", true); got != p {
		t.Fatalf("Take(the command it was started as) = %v, want the early agent", got)
	}
	if got := Take(path, argv, env, "", true); got != nil {
		t.Errorf("a second Take returned the early agent again")
	}
	// Put back, as if nothing had taken it: Discard stops it.
	mu.Lock()
	started = p
	mu.Unlock()
	done := make(chan struct{})
	go func() { Discard(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Discard did not return within 10 s")
	}
	if err := p.Proc.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("the discarded agent is still there (signal 0: %v)", err)
	}
}

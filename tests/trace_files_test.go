package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

// runBridgeOnce runs the bridge with args in front of the fake ACP child,
// initializes, and closes stdin; it returns the bridge's exit code and stderr.
func runBridgeOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(BridgeBin, append(args, "--", exe)...)
	cmd.Env = hermeticEnv(t, []string{"FAKE_AGENT=acp"})
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// --trace never follows a symbolic link: one planted where the trace goes
// (pointing at a file of the user's) is refused, and its target is left
// whole.
func TestTrace_RefusesSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "trace.ndjson")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--trace-append"}} {
		code, stderr := runBridgeOnce(t, append([]string{"--trace", link}, extra...)...)
		if code == 0 || !strings.Contains(stderr, "symbolic link") {
			t.Errorf("--trace at a symlink %v: exit %d, stderr:\n%s", extra, code, stderr)
		}
		if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
			t.Errorf("the link's target was written: %q", b)
		}
	}
}

// An existing --trace file is refused with what to do; --trace-append
// adds to it, and "%p" keeps one trace per process: what a test harness
// starting one bridge per scenario needs.
func TestTrace_ExistingFileAppendAndPID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "trace.ndjson")
	if code, stderr := runBridgeOnce(t, "--trace", path); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	first, _ := os.ReadFile(path)
	code, stderr := runBridgeOnce(t, "--trace", path)
	if code == 0 || !strings.Contains(stderr, "exists") || !strings.Contains(stderr, "--trace-append") || !strings.Contains(stderr, "%p") {
		t.Errorf("second run on the same file: exit %d, stderr:\n%s", code, stderr)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, first) {
		t.Errorf("the refused run changed the trace")
	}
	// A torn last record (a killed bridge) does not swallow what follows.
	if err := os.WriteFile(path, append(first, `{"t_ns":9,"hop":"ed`...), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stderr := runBridgeOnce(t, "--trace", path, "--trace-append"); code != 0 {
		t.Fatalf("--trace-append: exit %d\n%s", code, stderr)
	}
	one, err := trace.Read(bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	both, err := trace.ReadFile(path)
	if err != nil || len(both) != 2*len(one) {
		t.Errorf("appended trace: %d records, %v; want %d", len(both), err, 2*len(one))
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("trace mode: %v, %v", st.Mode(), err)
	}

	pattern := filepath.Join(dir, "run-%p.ndjson")
	for range 2 {
		if code, stderr := runBridgeOnce(t, "--trace", pattern); code != 0 {
			t.Fatalf("--trace with %%p: exit %d\n%s", code, stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "run-*.ndjson"))
	if len(files) != 2 {
		t.Errorf("two runs with %%p left %v, want two traces", files)
	}
	for _, f := range files {
		if strings.Contains(f, "%p") {
			t.Errorf("%%p not replaced: %s", f)
		}
	}
}

// writeTrace writes recs' lines as a trace file with mode perm.
func writeTrace(t *testing.T, path string, perm os.FileMode, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), perm); err != nil {
		t.Fatal(err)
	}
}

// The page holds every message of the trace: it keeps the trace's mode,
// even when it replaces a page that had another.
func TestTraceView_KeepsTraceMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "t.ndjson")
	writeTrace(t, path, 0o600, `{"t_ns":1,"hop":"editor","dir":"in","kind":"request","method":"initialize","id":1,"msg":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}}`)
	out := filepath.Join(dir, "t.html")
	if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"", out} {
		args := []string{"trace", "view", path}
		if o != "" {
			args = append(args, "-o", o)
		}
		cmd := exec.Command(BridgeBin, args...)
		cmd.Env = hermeticEnv(t, nil)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("trace view: %v\n%s", err, b)
		}
		page := path + ".html"
		if o != "" {
			page = o
		}
		if st, err := os.Stat(page); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want the trace's 0600", page, st.Mode(), err)
		}
	}
}

// trace view is linear: five deeply nested updates (the trace
// took 71 s, 12.9 GB and wrote a 1.5 GB page at depth 9,000) make a page
// about the trace's size, quickly, with the deep values elided.
func TestTraceView_DeepNestingBounded(t *testing.T) {
	t.Parallel()
	const depth = 1000 // 2,000 levels: an 80 MB page before
	path := filepath.Join(t.TempDir(), "deep.ndjson")
	var lines []string
	for i := range 5 {
		msg := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":` +
			strings.Repeat(`{"a":[`, depth) + strings.Repeat(`]}`, depth) + `}}`
		lines = append(lines, fmt.Sprintf(`{"t_ns":%d,"hop":"agent","dir":"in","link":1,"kind":"notification","method":"session/update","msg":%s}`, i, msg))
	}
	writeTrace(t, path, 0o600, lines...)
	st, _ := os.Stat(path)
	start := time.Now()
	page := viewOf(t, path)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("trace view took %v", d)
	}
	if len(page) > int(st.Size())+256<<10 {
		t.Errorf("a %d-byte trace made a %d-byte page", st.Size(), len(page))
	}
	if !strings.Contains(page, "more levels") {
		t.Errorf("the deep values are not marked elided")
	}
}

package store

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// faultFS is the OS's file system with faults injected into transcript
// writes and truncations.
type faultFS struct {
	osFS
	mu sync.Mutex
	// write, when set, decides what a transcript write does: how many of
	// the bytes reach the file, and the error returned.
	write    func(b []byte) (int, error)
	truncErr error
	// metaErr fails the writing of sidecars (their temporary files).
	metaErr error
}

func (x *faultFS) set(write func(b []byte) (int, error), truncErr error) {
	x.mu.Lock()
	x.write, x.truncErr = write, truncErr
	x.mu.Unlock()
}

func (x *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	x.mu.Lock()
	metaErr := x.metaErr
	x.mu.Unlock()
	if metaErr != nil && strings.HasPrefix(filepath.Base(name), ".meta-") {
		return nil, metaErr
	}
	f, err := x.osFS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".ndjson") {
		return f, err
	}
	return faultFile{f.(*os.File), x}, nil
}

type faultFile struct {
	*os.File
	x *faultFS
}

func (f faultFile) Write(b []byte) (int, error) {
	f.x.mu.Lock()
	hook := f.x.write
	f.x.mu.Unlock()
	if hook == nil {
		return f.File.Write(b)
	}
	n, err := hook(b)
	if n > 0 {
		if _, werr := f.File.Write(b[:n]); werr != nil {
			panic(werr)
		}
	}
	return n, err
}

func (f faultFile) Truncate(size int64) error {
	f.x.mu.Lock()
	err := f.x.truncErr
	f.x.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// half writes half of what it is given, then fails with err.
func half(err error) func([]byte) (int, error) {
	return func(b []byte) (int, error) { return len(b) / 2, err }
}

func update(n int) json.RawMessage {
	return json.RawMessage(`{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("x", 40) + `"}},"n":` + json.Number(string(rune('0'+n))).String() + `}`)
}

// faultRun records a turn, a second turn while writes fail as fault says,
// and a third once they work again, and returns the transcript and what
// it checked: every record of the first and third turn is there, in order
// and whole, and the second turn's are either there or counted by one
// gap record where they were lost.
func faultRun(t *testing.T, write func([]byte) (int, error), truncErr error) (*Transcript, gap) {
	t.Helper()
	x := &faultFS{}
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir, FS: x})
	create(t, s, "s1", Meta{Cwd: "/w"})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("before")})
	s.Append("s1", Record{Kind: KindUpdate, Body: update(1)})
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	if _, err := load(t, s, "s1"); err != nil {
		t.Fatal(err)
	}

	x.set(write, truncErr)
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("during")})
	for i := 2; i < 6; i++ {
		s.Append("s1", Record{Kind: KindUpdate, Body: update(i)})
	}
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	if _, err := load(t, s, "s1"); err != nil { // the writes were tried
		t.Fatal(err)
	}
	x.set(nil, nil)

	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("after")})
	s.Append("s1", Record{Kind: KindUpdate, Body: update(7)})
	s.Append("s1", Record{Kind: KindStop, Body: json.RawMessage(`{"stopReason":"end_turn"}`), Sync: true})
	s.Close()
	s2 := open(t, Options{Dir: dir})
	tr, err := load(t, s2, "s1")
	if err != nil {
		t.Fatal(err)
	}
	// before,update,stop | the second turn's records that were written
	// and gap records counting the others | gap,after,update,stop
	var got []string
	var g gap
	lost, kept := 0, 0
	for i, r := range tr.Records {
		label := r.Kind
		switch r.Kind {
		case KindGap:
			if err := json.Unmarshal(r.Body, &g); err != nil {
				t.Fatalf("gap body %s: %v", r.Body, err)
			}
			lost += g.Lost
		case KindPrompt:
			label = Title(r.Body)
		}
		got = append(got, label)
		if i >= 3 && i < len(tr.Records)-4 && r.Kind != KindGap {
			kept++
		}
	}
	all := strings.Join(got, ",")
	if !strings.HasPrefix(all, "before,update,stop,") || !strings.HasSuffix(all, ",gap,after,update,stop") {
		t.Fatalf("records %s; want before,update,stop, what survived of the second turn, gap,after,update,stop", all)
	}
	if mid := strings.Join(got[3:len(got)-3], ","); strings.Contains(mid, "before") || strings.Contains(mid, "after") {
		t.Fatalf("records %s: out of order", all)
	}
	if lost+kept != 6 || g.Cause == "" {
		t.Fatalf("records %s: %d lost and %d written of the failed turn's 6; last gap %+v", all, lost, kept, g)
	}
	return tr, g
}

type gap struct {
	Lost    int    `json:"lost"`
	Cause   string `json:"cause"`
	Dropped int    `json:"dropped"`
}

func TestFault_FullDiskMidLineThenSpace(t *testing.T) {
	tr, g := faultRun(t, half(syscall.ENOSPC), nil)
	if tr.Skipped != 0 {
		t.Fatalf("%d lines skipped: the torn write was not undone", tr.Skipped)
	}
	if !strings.Contains(g.Cause, "no space") {
		t.Fatalf("gap cause %q", g.Cause)
	}
}

func TestFault_IOError(t *testing.T) {
	tr, g := faultRun(t, func([]byte) (int, error) { return 0, syscall.EIO }, nil)
	if tr.Skipped != 0 || g.Lost != 6 || len(tr.Records) != 7 || !strings.Contains(g.Cause, "input/output") {
		t.Fatalf("skipped %d, gap %+v", tr.Skipped, g)
	}
}

func TestFault_ShortWrite(t *testing.T) {
	tr, g := faultRun(t, half(nil), nil)
	if tr.Skipped != 0 || !strings.Contains(g.Cause, io.ErrShortWrite.Error()) {
		t.Fatalf("skipped %d, gap %+v", tr.Skipped, g)
	}
}

// When the torn write cannot be truncated away either, the next record
// starts on a line of its own: the torn one is skipped, nothing glued.
func TestFault_TruncateFailsToo(t *testing.T) {
	tr, g := faultRun(t, func(b []byte) (int, error) { return len(b) - 3, syscall.ENOSPC }, errors.New("truncate: injected"))
	if tr.Skipped == 0 || !strings.Contains(g.Cause, "truncate: injected") {
		t.Fatalf("skipped %d (want the torn line), gap %+v", tr.Skipped, g)
	}
}

// A sidecar that cannot be rewritten keeps its last good version.
func TestFault_SidecarKeepsLastGood(t *testing.T) {
	x := &faultFS{}
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir, FS: x})
	create(t, s, "s1", Meta{Cwd: "/w"})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("first"), Sync: true})
	s.barrier()                   // the stop's flush queued the sidecar
	synced := make(chan struct{}) // the syncer has written the sidecar
	s.do(func() { s.files["s1"].jobs.Wait(); close(synced) })
	<-synced
	x.mu.Lock()
	x.metaErr = syscall.ENOSPC
	x.mu.Unlock()
	s.Append("s1", Record{Kind: KindBackend, Backend: "b-2", Link: "own", Sync: true})
	s.Close()
	m, err := s.readMeta(filepath.Join(dir, "s1.json"))
	if err != nil || m.Title != "first" || m.Backend != "" {
		t.Fatalf("sidecar after a failed rewrite: %+v %v; want the last good one", m, err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".meta-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

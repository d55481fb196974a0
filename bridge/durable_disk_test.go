package bridge_test

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// fullDisk is the OS's file system whose transcript writes fail with
// ENOSPC while full is set, after writing part of what they were given (a
// disk that fills in the middle of a record).
type fullDisk struct {
	mu   sync.Mutex
	full bool
}

func (d *fullDisk) set(full bool) { d.mu.Lock(); d.full = full; d.mu.Unlock() }
func (d *fullDisk) isFull() bool  { d.mu.Lock(); defer d.mu.Unlock(); return d.full }

func (d *fullDisk) OpenFile(name string, flag int, perm fs.FileMode) (store.File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fullFile{File: f, d: d, transcript: strings.HasSuffix(name, ".ndjson")}, nil
}
func (d *fullDisk) Rename(o, n string) error                { return os.Rename(o, n) }
func (d *fullDisk) Remove(n string) error                   { return os.Remove(n) }
func (d *fullDisk) ReadDir(n string) ([]fs.DirEntry, error) { return os.ReadDir(n) }
func (d *fullDisk) Lstat(n string) (fs.FileInfo, error)     { return os.Lstat(n) }

type fullFile struct {
	*os.File
	d          *fullDisk
	transcript bool
}

func (f *fullFile) Write(b []byte) (int, error) {
	if f.transcript && f.d.isFull() {
		n, _ := f.File.Write(b[:len(b)/2])
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(b)
}

// A disk that fills during a turn loses the turn's records, never the
// relay: the editor gets every update and answer. The torn write is undone,
// a gap record marks the loss once the disk has room again, the loss is
// logged, and the next turn is recorded whole (not glued to a torn line).
func TestDurable_FullDiskLosesNothingSilently(t *testing.T) {
	disk := &fullDisk{}
	var logs strings.Builder
	var logMu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), Level: hclog.Warn})
	dir := t.TempDir()
	st, err := store.Open(store.Options{Dir: dir, FS: disk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := newHarness(t, func(b *bridge.Bridge) { b.Sessions = &bridge.Durable{Store: st} })
	h.initialize()
	sid := h.newSession("1")
	turn := func(id int, text string) {
		t.Helper()
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}}`, id, sid, text))
		req := h.agentRecv()
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"re: %s"}}}}`, sid, text))
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
		if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "re: "+text {
			t.Fatalf("update = %s", got)
		}
		if got := h.recv(); gjson.Get(got, "result.stopReason").Str != "end_turn" {
			t.Fatalf("answer = %s", got)
		}
		time.Sleep(50 * time.Millisecond) // past the writer's batch delay
	}
	turn(2, "before")
	disk.set(true)
	turn(3, "while full")
	disk.set(false)
	turn(4, "after")
	h.close()

	var got []string
	done := make(chan struct{})
	st.Read(sid, func(r *store.Reader, err error) {
		defer close(done)
		if err != nil {
			t.Errorf("read: %v", err)
			return
		}
		defer r.Close()
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			switch rec.Kind {
			case store.KindPrompt:
				got = append(got, "prompt:"+gjson.GetBytes(rec.Body, "prompt.0.text").Str)
			case store.KindGap:
				got = append(got, "gap")
			}
		}
		if r.Skipped() > 0 {
			t.Errorf("%d unreadable lines: a torn write was left in the transcript", r.Skipped())
		}
	})
	<-done
	want := "prompt:before,gap,prompt:after"
	if strings.Join(got, ",") != want {
		t.Errorf("transcript holds %v, want %s", got, want)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logs.String(), "no space left") {
		t.Errorf("the failed write was not logged with its cause:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// gatedDisk is the OS's file system whose first transcript write holding
// a prompt record waits until gate is closed.
type gatedDisk struct {
	fullDisk
	gate    chan struct{}
	waiting chan struct{} // closed when that write has begun waiting
	once    sync.Once
}

func (d *gatedDisk) OpenFile(name string, flag int, perm fs.FileMode) (store.File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, d: d}, nil
}

type gatedFile struct {
	*os.File
	d *gatedDisk
}

func (f *gatedFile) Write(b []byte) (int, error) {
	if strings.HasSuffix(f.Name(), ".ndjson") && strings.Contains(string(b), `{"t":"prompt"`) {
		f.d.once.Do(func() { close(f.d.waiting) })
		<-f.d.gate
	}
	return f.File.Write(b)
}

// No update of a turn reaches the editor before the turn's prompt record
// has been handed to the OS: a bridge killed mid-turn then always leaves a
// turn open in the transcript, which the next process to take the session
// marks with a gap record. The disk here holds the prompt's write until
// the test lets it go; an update of a session nobody recorded, sent by
// the agent after the turn's first update, is not held and shows the
// order the editor would otherwise have seen.
func TestDurable_TurnUpdatesWaitForThePromptRecord(t *testing.T) {
	disk := &gatedDisk{gate: make(chan struct{}), waiting: make(chan struct{})}
	var open sync.Once
	release := func() { open.Do(func() { close(disk.gate) }) }
	st, err := store.Open(store.Options{Dir: t.TempDir(), FS: disk})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer release() // before Close, which waits for the writer
	h := newHarness(t, func(b *bridge.Bridge) { b.Sessions = &bridge.Durable{Store: st} })
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
	req := h.agentRecv()
	<-disk.waiting
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + sid + `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"first"}}}}`)
	h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"unrecorded","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"marker"}}}}`)
	if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "marker" {
		t.Fatalf("the editor got %s before the turn's prompt was written; want the other session's update first", got)
	}
	release()
	if got := h.recv(); gjson.Get(got, "params.update.content.text").Str != "first" {
		t.Fatalf("after the prompt was written: %s, want the turn's first update", got)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if got := h.recv(); gjson.Get(got, "result.stopReason").Str != "end_turn" {
		t.Fatalf("answer = %s", got)
	}
	h.close()
}

//go:build perf

package store

import (
	"io/fs"
	"os"
	"runtime"
	"testing"
	"unsafe"
)

// discardFS is the operating system's file system with writes that go
// nowhere: the writer never waits for the kernel, so whether it keeps up
// is a matter of scheduling alone.
type discardFS struct{ osFS }

func (x discardFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := x.osFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return discardFile{f.(*os.File)}, nil
}

type discardFile struct{ *os.File }

func (discardFile) Write(p []byte) (int, error) { return len(p), nil }

// Sync does nothing: what was written went nowhere, and an fsync would
// block the writer in the kernel, the thing this file system is for
// keeping out of the test.
func (discardFile) Sync() error { return nil }

// TestStore_StreamOnOnePKeepsTheWriterUp: on one P (the stdio relay's), a
// stream whose producer never waits, as a link does whose agent keeps
// ahead of it, still has its records taken by the writer as they pass the
// hand-off size: the arena stays the size it was made, and nothing is
// dropped. Before the producer yielded at the hand-off, the writer ran
// only when the runtime preempted the producer, 10 ms later: the arena
// grew by reallocation, and past QueueBytes records were dropped (75-95%
// of them here). The writes go nowhere (discardFS): a disk slower than
// the producer is a cause of drops of its own, not the one tested.
func TestStore_StreamOnOnePKeepsTheWriterUp(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := open(t, Options{QueueBytes: 512 << 10, MaxSessionBytes: 1 << 30, FS: discardFS{}})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi")}) // a turn's stream
	made := s.streamArenaSize()                                  // what a stream's arenas are made (streamArena)

	// Not text chunks, which the store joins: a record each.
	update := []byte(`{"sessionUpdate":"plan","entries":[{"content":"step","priority":"high","status":"pending"}]}`)
	const updates = 100_000 // 11 MB of records, 22 times the queue's bound
	l := s.Lines()
	largest := made
	for range updates {
		l.SessionUpdate("s1", update)
		s.mu.Lock()
		largest = max(largest, cap(s.arena))
		s.mu.Unlock()
	}
	l.Flush()
	if d := s.Dropped(); d != 0 {
		t.Errorf("%d of %d records dropped: the writer did not keep up with a producer on one P", d, updates)
	}
	if largest > made {
		t.Errorf("the arena grew from %d to %d bytes: the writer did not take it at the hand-off", made, largest)
	}
}

// TestStore_ArenasStreamSizedOnceATurnStreams: the stream-sized arenas
// wait for a turn's stream; the stream then runs in those two without
// growing them, nor its Lines' buffer: a stream never reallocates its
// buffers. (That records before a turn leave the arenas small is
// TestStore_ArenasSmallBeforeATurn's, which asserts no schedule.)
func TestStore_ArenasStreamSizedOnceATurnStreams(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the writer takes the arena at the hand-off (see above)
	s := open(t, Options{QueueBytes: 4 << 20, MaxSessionBytes: 1 << 30, FS: discardFS{}})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("hi")})

	l := s.Lines()
	update := []byte(`{"sessionUpdate":"plan","entries":[{"content":"step","priority":"high","status":"pending"}]}`)
	seen := map[uintptr]bool{}
	var runMade *byte
	for i := range 20_000 { // 2 MB of records: the writer takes the arena a few times
		l.SessionUpdate("s1", update)
		if i == 0 {
			runMade = unsafe.SliceData(l.buf)
		}
		if i%500 != 0 {
			continue
		}
		l.Flush()
		s.mu.Lock()
		c := cap(s.arena)
		seen[uintptr(unsafe.Pointer(unsafe.SliceData(s.arena)))] = true
		s.mu.Unlock()
		if c != s.streamArenaSize() {
			t.Fatalf("after %d updates the arena holds %d bytes, want %d", i+1, c, s.streamArenaSize())
		}
	}
	l.Flush()
	if len(seen) != 2 {
		t.Errorf("the stream ran in %d arenas, want the two the Store and its writer swap", len(seen))
	}
	if unsafe.SliceData(l.buf) != runMade {
		t.Errorf("the run of records moved: it was made too small and grew")
	}
	if d := s.Dropped(); d != 0 {
		t.Errorf("%d records dropped", d)
	}
}

package bridge

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// sendAll hands a batch over in order and within the queue's bound: with a
// queue of 64 bytes and an editor that reads, 200 messages arrive, in
// order; with an editor that stops reading, sendAll waits for room and
// gives up, saying how many it queued, once told to stop.
func TestSendAllKeepsOrderAndBound(t *testing.T) {
	r, w := io.Pipe()
	ew := newEditorWriter(w, 64)
	go ew.writeLoop()
	var batch []editorMsg
	for i := range 200 {
		batch = append(batch, editorMsg{body: fmt.Appendf(nil, "%03d", i)})
	}
	got := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for i := range 200 {
			if !sc.Scan() || sc.Text() != fmt.Sprintf("%03d", i) {
				got <- fmt.Errorf("line %d: %q", i, sc.Text())
				return
			}
		}
		got <- nil
	}()
	if n := ew.sendAll(batch, nil); n != len(batch) {
		t.Fatalf("sendAll queued %d of %d", n, len(batch))
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}

	// Nobody reads now: the writer blocks in its write, the queue fills.
	// The writer buffers 64 KiB before it writes, so the batch is larger
	// than that: however the writer and sendAll interleave, it must block.
	batch = batch[:0]
	for i := range 200 {
		batch = append(batch, editorMsg{body: fmt.Appendf(nil, "%03d%s", i, bytes.Repeat([]byte("x"), 1<<10))})
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() { done <- ew.sendAll(batch, stop) }()
	select {
	case n := <-done:
		t.Fatalf("sendAll returned (%d queued) while the editor was not reading", n)
	case <-time.After(100 * time.Millisecond):
	}
	ew.mu.Lock()
	queued := ew.queued
	ew.mu.Unlock()
	// (A message larger than the bound is let in alone.)
	if one := batch[0].size(); queued > max(64, one) {
		t.Errorf("%d bytes queued, over the 64-byte bound and more than one %d-byte message", queued, one)
	}
	close(stop)
	if n := <-done; n == 0 || n >= len(batch) {
		t.Errorf("sendAll queued %d of %d before it was stopped; want some, not all", n, len(batch))
	}
	r.Close()
}

// lockedSink is the editor's stream, read by the test while the writer
// writes it.
type lockedSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *lockedSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(b)
}

func (s *lockedSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Every way a message reaches the writer (send, sendAll), in any
// interleaving and with another goroutine sending meanwhile: every message
// arrives whole, once, in the order it was handed over, and no line of one
// sender is cut by the other's. Seeded random sequences.
func TestWriterInterleavings(t *testing.T) {
	for seed := range int64(200) {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		sink := &lockedSink{}
		ew := newEditorWriter(sink, 256)
		go ew.writeLoop()
		other := make(chan struct{})
		go func() {
			defer close(other)
			for i := range 30 {
				ew.send(editorMsg{body: fmt.Appendf(nil, `{"other":%d}`, i), oneLine: true}, nil)
				time.Sleep(time.Duration(rng2(seed, i)) * time.Microsecond)
			}
		}()
		var want []string
		next := 0
		msg := func() editorMsg {
			next++
			want = append(want, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, next, strings.Repeat("x", rng.IntN(40))))
			return editorMsg{body: []byte(want[len(want)-1]), oneLine: true}
		}
		for range 60 {
			switch rng.IntN(3) {
			case 0:
				if !ew.send(msg(), nil) {
					t.Fatalf("seed %d: send refused", seed)
				}
			case 1:
				batch := []editorMsg{msg()}
				for range rng.IntN(3) {
					batch = append(batch, msg())
				}
				if ew.sendAll(batch, nil) != len(batch) {
					t.Fatalf("seed %d: sendAll refused", seed)
				}
			case 2:
				time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
			}
		}
		<-other
		if err := ew.close(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatalf("seed %d: close: %v", seed, err)
		}
		var got []string
		others := 0
		for _, line := range strings.Split(strings.TrimSuffix(sink.String(), "\n"), "\n") {
			if strings.HasPrefix(line, `{"other":`) {
				if line != fmt.Sprintf(`{"other":%d}`, others) {
					t.Fatalf("seed %d: line %q where the other sender's %d was due", seed, line, others)
				}
				others++
				continue
			}
			got = append(got, line)
		}
		if others != 30 {
			t.Fatalf("seed %d: %d of the other sender's 30 lines", seed, others)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("seed %d: the editor got\n%s\nwant\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// rng2 is the other sender's pause, its own sequence (rand.Rand is not
// safe for two goroutines).
func rng2(seed int64, i int) int { return int((seed*7919 + int64(i)*104729) % 150) }

// A burst grows the writer's queues to its thousands of messages; once the
// writer has been idle a while (idleTrim) it keeps neither (the idle
// bridge's footprint), but it keeps them over a short idle (a stream's,
// between two reads of its agent's).
func TestWriterLetsBurstQueuesGo(t *testing.T) {
	sink := &lockedSink{}
	ew := newEditorWriter(sink, 1<<20)
	var batch []editorMsg
	for i := range 20 * keptQueue {
		batch = append(batch, editorMsg{body: fmt.Appendf(nil, `{"n":%d}`, i), oneLine: true})
	}
	// Queued before the writer starts: one batch of them all.
	if n := ew.sendAll(batch, nil); n != len(batch) {
		t.Fatalf("queued %d of %d", n, len(batch))
	}
	// The writer goes idle after it starts: measured from before, the
	// trim can come no sooner than idleTrim.
	start := time.Now()
	go ew.writeLoop()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		ew.mu.Lock()
		idle, q, sp := ew.idle, cap(ew.queue), cap(ew.spare)
		ew.mu.Unlock()
		if idle && q <= keptQueue && sp <= keptQueue {
			if d := time.Since(start); d < idleTrim {
				t.Fatalf("the writer let its burst's queues go %v after it started, before idleTrim (%v)", d, idleTrim)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle writer keeps queues of capacity %d and %d, over %d (idle: %v)", q, sp, keptQueue, idle)
		}
	}
	if got := strings.Count(sink.String(), "\n"); got != len(batch) {
		t.Errorf("%d lines written, want %d", got, len(batch))
	}
	if err := ew.close(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
}

// An agent that pauses after every update makes runs of one message each
// (the reader flushes at every pause), and the editor's queue counts a
// run's length, not its 64 KiB buffer: an editor that stops reading must
// not make the bridge hold a buffer for every few hundred bytes queued.
// Whatever is queued, at most maxRuns run buffers exist; the messages past
// them are copied on their own from a source scribbled over after each (as
// the reader's buffer is), and every message arrives whole, in order, once
// the editor reads again.
func TestRunsStayBoundedWhenTheEditorStalls(t *testing.T) {
	r, w := io.Pipe()
	const limit = 128 << 10
	e := &engine{b: &Bridge{}, log: hclog.NewNullLogger(), out: newEditorWriter(w, limit), stopWrites: make(chan struct{})}
	go e.out.writeLoop()
	const n = 4000
	line := func(i int) []byte { return fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, strings.Repeat("p", 100)) }
	pushed := make(chan struct{})
	go func() {
		defer close(pushed)
		src := make([]byte, 0, 256)
		for i := range n {
			src = append(src[:0], line(i)...)
			e.batching, e.runs = true, true
			e.writeEditorSession(editorMsg{body: src, oneLine: true}, "s1")
			e.flushEditor() // the agent paused
			e.batching, e.runs = false, false
			for j := range src {
				src[j] = 'X'
			}
		}
	}()
	// Wait until the queue is full: the writer is stuck in its write.
	msg := len(line(n)) + 1
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		e.out.mu.Lock()
		full := e.out.queued+msg > limit
		e.out.mu.Unlock()
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the editor's queue did not fill in 10 s")
		}
	}
	e.out.mu.Lock()
	held := 0
	for _, m := range e.out.queue {
		held += cap(m.body)
	}
	e.out.mu.Unlock()
	if made := e.out.made.Load(); made > maxRuns {
		t.Errorf("%d run buffers exist, over maxRuns (%d)", made, maxRuns)
	}
	// (A message copied on its own takes its allocation's size class.)
	if bound := 2*limit + maxRuns*runBytes; held > bound {
		t.Errorf("the queue holds %d bytes of buffers for %d bytes of messages, over %d", held, limit, bound)
	}
	t.Logf("queue full: %d bytes of buffers held", held)

	sc := bufio.NewScanner(r)
	for i := range n {
		if !sc.Scan() {
			t.Fatalf("line %d: %v", i, sc.Err())
		}
		if want := line(i); !bytes.Equal(sc.Bytes(), want) {
			t.Fatalf("line %d = %.60s…, want %.60s…", i, sc.Bytes(), want)
		}
	}
	<-pushed
	go io.Copy(io.Discard, r)
	if err := e.out.close(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
}

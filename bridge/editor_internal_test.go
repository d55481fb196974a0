package bridge

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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

// Every way a message reaches the writer (send, sendAll, a link's copied
// lines and kick, a link's published batch), in any interleaving and with
// another goroutine sending meanwhile: every message arrives whole, once,
// in the order it was handed over, no line of one sender is cut by the
// other's, and a batch buffer publish hands back is the caller's to
// overwrite. Seeded random sequences.
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
		var batchBuf []byte // a link's batch buffer: its own once publish returns it
		for range 60 {
			switch rng.IntN(5) {
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
			case 3:
				// A link's read: updates copied without waking the
				// writer, then the kick before it waits.
				for range 1 + rng.IntN(4) {
					m := msg()
					var ok bool
					if rng.IntN(2) == 0 {
						ok = ew.trySendLine(m.body, true)
					} else {
						ok = ew.trySend(&m, true, true)
					}
					if !ok {
						if !ew.send(m, nil) {
							t.Fatalf("seed %d: send refused", seed)
						}
					}
				}
				ew.kick()
			case 4:
				// A link's batch (engine.beginBatch): as much as space
				// said fits, published in one piece, and the buffer
				// publish returns reused for the next, overwritten:
				// a writer still reading the last one would write
				// the new batch's bytes in its place.
				m := msg()
				room, ok := ew.space(m.size())
				if !ok {
					if !ew.send(m, nil) {
						t.Fatalf("seed %d: send refused", seed)
					}
					break
				}
				if cap(batchBuf) < blockSize {
					batchBuf = make([]byte, 0, blockSize) // (as beginBatch makes one)
				}
				b := append(append(batchBuf[:0], m.body...), '\n')
				for range rng.IntN(4) {
					m := msg()
					if len(b)+m.size() > room {
						next-- // (not sent after all)
						want = want[:len(want)-1]
						break
					}
					b = append(append(b, m.body...), '\n')
				}
				nextBuf, ok := ew.publish(b, true)
				if !ok {
					t.Fatalf("seed %d: publish refused", seed)
				}
				batchBuf = nextBuf
				for i := range batchBuf[:cap(batchBuf)] {
					batchBuf[:cap(batchBuf)][i] = '#'
				}
				if rng.IntN(2) == 0 {
					ew.kick()
				}
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

// A message trySend copies is the writer's: the sender overwrites its
// buffer the moment trySend returns, as a link does with a borrowed frame
// at its next read, and every message still arrives whole and in order,
// whatever its size against the writer's blocks, its parts (a renamed
// session's head, id and tail) or how the writer's batches fall. Once the
// queue has cycled through its bound, a stream of them allocates nothing:
// the blocks are reused, not collected.
func TestTrySendCopyOwnsTheBytes(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			r, w := io.Pipe()
			ew := newEditorWriter(w, 64<<10)
			go ew.writeLoop()
			var want []string
			got := make(chan []string, 1)
			go func() {
				sc := bufio.NewScanner(r)
				sc.Buffer(nil, 1<<20)
				var lines []string
				for sc.Scan() {
					lines = append(lines, sc.Text())
				}
				got <- lines
			}()
			buf := make([]byte, 0, 2*maxCarved)
			for i := range 5000 {
				n := 1 + rng.IntN(40)
				switch rng.IntN(50) {
				case 0:
					n = maxCarved + rng.IntN(maxCarved) // a slice of its own
				case 1:
					n = blockSize/4 - rng.IntN(8) // ends a block, or nearly
				}
				line := fmt.Sprintf("%05d:%s", i, strings.Repeat(string(rune('a'+i%26)), n))
				if rng.IntN(20) == 0 {
					// Not an agent's frame (a translator's): line breaks
					// become spaces.
					line = fmt.Sprintf("%05d:\n%s\r\n", i, strings.Repeat("z", n))
				}
				buf = append(buf[:0], line...)
				m := editorMsg{body: buf, oneLine: !strings.ContainsAny(line, "\r\n")}
				if i%7 == 0 && len(buf) > 8 {
					m = editorMsg{head: buf[:3], body: buf[3:6], tail: buf[6:], oneLine: m.oneLine}
				}
				if rng.IntN(10) == 0 {
					// A message the loop sends, not copied: it ends the
					// run of copied ones, and the next starts another.
					if !ew.send(editorMsg{body: []byte(line), oneLine: m.oneLine}, nil) {
						t.Fatal("send failed")
					}
				} else {
					for !ew.trySend(&m, i%3 == 0, true) {
						ew.kick()
						time.Sleep(50 * time.Microsecond) // the queue is full: let the writer take it
					}
				}
				for j := range buf {
					buf[j] = '#' // the sender's next frame
				}
				want = append(want, strings.NewReplacer("\r", " ", "\n", " ").Replace(line))
				if rng.IntN(100) == 0 {
					ew.kick()
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
			ew.kick()
			if err := ew.close(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			lines := <-got
			if len(lines) != len(want) {
				t.Fatalf("%d lines arrived, want %d", len(lines), len(want))
			}
			for i := range want {
				if lines[i] != want[i] {
					t.Fatalf("line %d: got %.40q…, want %.40q…", i, lines[i], want[i])
				}
			}
		})
	}

	// The steady state: no allocation per message, and none when the
	// writer idles between bursts, as a stream's does between reads.
	msg := editorMsg{body: bytes.Repeat([]byte("x"), 180), oneLine: true}
	ew2 := newEditorWriter(io.Discard, 1<<20)
	go ew2.writeLoop()
	burst := func() {
		for range 3 * keptQueue {
			for !ew2.trySend(&msg, true, true) {
				ew2.kick()
				runtime.Gosched()
			}
		}
		ew2.kick()
		for deadline := time.Now().Add(5 * time.Second); ; runtime.Gosched() {
			ew2.mu.Lock()
			idle := ew2.idle
			ew2.mu.Unlock()
			if idle || time.Now().After(deadline) {
				return
			}
		}
	}
	for range 3 {
		burst()
	}
	if n := mallocs(func() {
		for range 10 {
			burst()
		}
	}); n > 64 {
		// (Not 0: a batch larger than any before grows the queue's
		// array once, and under -race the batches' sizes vary more. One
		// allocation per message would be 30,720; the trim at every
		// idle, 263.)
		t.Errorf("%d allocations for 10 bursts of %d messages with the writer idle between them, want at most 64", n, 3*keptQueue)
	}
	if err := ew2.close(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}

	ew := newEditorWriter(io.Discard, 64<<10)
	go ew.writeLoop()
	send := func() {
		for !ew.trySend(&msg, false, true) {
			runtime.Gosched()
		}
	}
	for range 20000 { // the queue cycles through its bound and the blocks
		send()
	}
	if n := mallocs(func() {
		for range 20000 {
			send()
		}
	}); n > 10 {
		t.Errorf("%d allocations for 20,000 copied messages, want none once the blocks cycle", n)
	}
	if err := ew.close(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
}

// mallocs counts the allocations made while f runs, by every goroutine:
// over a whole run, where testing.AllocsPerRun would round one block per
// hundred messages down to none.
func mallocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// A link's stream queued while the writer is not woken for it (later):
// the writer is woken once, when laterBytes are queued, and not again for
// the updates that follow while it writes; every update joins the run
// being filled, on trySendLine's own path past laterBytes as before it.
func TestTrySendLineWakesOnceAtLaterBytes(t *testing.T) {
	ew := newEditorWriter(io.Discard, 1<<20) // (no writeLoop: nothing is taken)
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}`)
	woken := func() bool {
		select {
		case <-ew.wake:
			return true
		default:
			return false
		}
	}
	queued, wakes, crossedAt := 0, 0, -1
	for i := 0; queued < 3*laterBytes; i++ {
		if !ew.trySendLine(line, true) {
			t.Fatalf("update %d refused with %d bytes queued", i, queued)
		}
		queued += len(line) + 1
		if woken() {
			wakes++
			if queued < laterBytes {
				t.Fatalf("the writer was woken at %d bytes, before laterBytes", queued)
			}
			if crossedAt < 0 {
				crossedAt = queued
			}
		}
	}
	if wakes != 1 || crossedAt-(len(line)+1) >= laterBytes {
		t.Fatalf("the writer was woken %d times, first at %d bytes; want once, when laterBytes (%d) were queued", wakes, crossedAt, laterBytes)
	}
	ew.mu.Lock()
	defer ew.mu.Unlock()
	if ew.queued != queued {
		t.Fatalf("%d bytes queued, want %d", ew.queued, queued)
	}
	var body int
	for _, m := range ew.queue {
		if !m.raw {
			t.Fatalf("a message queued on its own, not in a run: %q", m.body)
		}
		body += len(m.body)
	}
	if body != queued || len(ew.queue) > queued/blockSize+1 {
		t.Fatalf("the queue holds %d runs of %d bytes, want the %d bytes in one run per block", len(ew.queue), body, queued)
	}
}

// A send that waits for room wakes a writer that a link left asleep with
// its messages queued (trySend's later, for the kick the link makes before
// it waits): the link may be waiting for the gate that send's caller, the
// loop, holds, and only the writer makes room. The interleavings test once
// hung on this, in some seven runs.
func TestSendWakesTheWriterItWaitsFor(t *testing.T) {
	sink := &lockedSink{}
	ew := newEditorWriter(sink, 256)
	go ew.writeLoop()
	defer ew.close(time.Now().Add(5 * time.Second))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		ew.mu.Lock()
		idle := ew.idle
		ew.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer did not go idle")
		}
	}
	small := editorMsg{body: []byte(`{"n":1,"pad":"` + strings.Repeat("x", 80) + `"}`), oneLine: true}
	if !ew.trySend(&small, true, true) {
		t.Fatal("trySend refused the first message")
	}
	big := editorMsg{body: []byte(`{"n":2,"pad":"` + strings.Repeat("y", 250) + `"}`), oneLine: true}
	sent := make(chan bool, 1)
	go func() { sent <- ew.send(big, nil) }()
	select {
	case ok := <-sent:
		if !ok {
			t.Fatal("send refused")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a send waiting for room did not wake the writer: it waits for good")
	}
	if err := ew.close(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, want := sink.String(), string(small.body)+"\n"+string(big.body)+"\n"; got != want {
		t.Errorf("the editor got %q, want %q", got, want)
	}
}

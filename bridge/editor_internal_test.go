package bridge

import (
	"bufio"
	"fmt"
	"io"
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
	if queued > 64 {
		t.Errorf("%d bytes queued, over the 64-byte bound", queued)
	}
	close(stop)
	if n := <-done; n == 0 || n >= len(batch) {
		t.Errorf("sendAll queued %d of %d before it was stopped; want some, not all", n, len(batch))
	}
	r.Close()
}

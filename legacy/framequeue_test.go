package legacy

import (
	"fmt"
	"testing"
	"time"
)

// Frames pass in order between a fast reader and a slower Read, the queue
// never holds more than its bounds, and its slice does not grow with the
// number of frames that went through it.
func TestFrameQueueOrderAndBounds(t *testing.T) {
	q := newFrameQueue()
	stop := make(chan struct{})
	defer close(stop)
	const n = 20000
	go func() {
		for i := range n {
			if _, ok := q.push(fmt.Appendf(nil, "%d", i), 0, stop); !ok {
				return
			}
		}
	}()
	for i := range n {
		var frame []byte
		for {
			f, ok := q.pop()
			if ok {
				frame = f.frame
				break
			}
			select {
			case <-q.ready:
			case <-time.After(5 * time.Second):
				t.Fatalf("frame %d never came", i)
			}
		}
		if want := fmt.Sprint(i); string(frame) != want {
			t.Fatalf("frame %d = %s", i, frame)
		}
		q.mu.Lock()
		queued, c := len(q.frames)-q.head, cap(q.frames)
		q.mu.Unlock()
		if queued > maxQueued || c > 2*maxQueued+64 {
			t.Fatalf("after %d frames: %d queued, slice capacity %d", i, queued, c)
		}
	}
}

// One frame is queued however large; a second waits for room, and stop
// ends the wait.
func TestFrameQueueBytesBound(t *testing.T) {
	q := newFrameQueue()
	stop := make(chan struct{})
	big := make([]byte, 2*maxQueuedBytes)
	if _, ok := q.push(big, 0, stop); !ok {
		t.Fatal("push of one large frame failed")
	}
	pushed := make(chan bool, 1)
	go func() { _, ok := q.push([]byte("x"), 0, stop); pushed <- ok }()
	select {
	case <-pushed:
		t.Fatal("a second frame was queued beyond the byte bound")
	case <-time.After(50 * time.Millisecond):
	}
	if f, ok := q.pop(); !ok || len(f.frame) != len(big) {
		t.Fatalf("pop = %d bytes, %v", len(f.frame), ok)
	}
	if ok := <-pushed; !ok {
		t.Fatal("the waiting push failed after room was made")
	}
	if f, ok := q.pop(); !ok || string(f.frame) != "x" {
		t.Fatalf("pop = %q, %v", f.frame, ok)
	}

	q.push(big, 0, stop)
	go func() { _, ok := q.push([]byte("y"), 0, stop); pushed <- ok }()
	time.Sleep(20 * time.Millisecond)
	close(stop)
	if ok := <-pushed; ok {
		t.Error("push waiting for room returned true after stop")
	}
}

// push says when it woke a Read that found the queue empty, and only then:
// the stdout reader then lets that Read run before it reads again.
func TestFrameQueuePushSaysWhenItWokeRead(t *testing.T) {
	q := newFrameQueue()
	stop := make(chan struct{})
	if woke, _ := q.push([]byte("a"), 0, stop); woke {
		t.Error("the first push, with no Read waiting, says it woke one")
	}
	q.pop()
	if _, ok := q.pop(); ok {
		t.Fatal("pop of an empty queue returned a frame")
	}
	if woke, _ := q.push([]byte("b"), 0, stop); !woke {
		t.Error("a push after Read found the queue empty does not say it woke it")
	}
	if woke, _ := q.push([]byte("c"), 0, stop); woke {
		t.Error("a second push says it woke Read again")
	}
}

// pop takes a run of frames at once and returns them one by one; once the
// queue is cleared (Close), none of them is returned, and a push that
// waited for room gets it as soon as the run is taken.
func TestFrameQueueClearDropsWhatPopTook(t *testing.T) {
	q := newFrameQueue()
	stop := make(chan struct{})
	defer close(stop)
	for i := range 10 {
		q.push(fmt.Appendf(nil, "%d", i), 0, stop)
	}
	if f, ok := q.pop(); !ok || string(f.frame) != "0" {
		t.Fatalf("pop = %q, %v; want frame 0", f.frame, ok)
	}
	q.mu.Lock()
	left := len(q.frames) - q.head
	q.mu.Unlock()
	if left != 0 || len(q.taken)-q.next != 9 {
		t.Fatalf("after one pop: %d queued, %d taken; want the run taken whole", left, len(q.taken)-q.next)
	}
	if f, ok := q.pop(); !ok || string(f.frame) != "1" {
		t.Fatalf("pop = %q, %v; want frame 1", f.frame, ok)
	}
	q.clear()
	if f, ok := q.pop(); ok {
		t.Fatalf("pop after clear = %q; want nothing", f.frame)
	}
}

// A run pop takes is bounded by takeBytes (but for its first frame, which
// is taken whatever its size) and by takeFrames.
func TestFrameQueueRunBounds(t *testing.T) {
	q := newFrameQueue()
	stop := make(chan struct{})
	defer close(stop)
	big := make([]byte, takeBytes/2+1)
	for range 3 {
		q.push(big, 0, stop)
	}
	q.pop()
	if n := len(q.taken); n != 1 {
		t.Fatalf("took %d frames of %d bytes at once; want 1 (takeBytes %d)", n, len(big), takeBytes)
	}
	for range 2*takeFrames + 1 {
		q.push([]byte("x"), 0, stop)
	}
	for q.next < len(q.taken) {
		q.pop()
	}
	q.pop() // the second big frame, alone
	q.pop() // the third, and a run of small ones after it
	if n := len(q.taken); n > takeFrames {
		t.Fatalf("took %d frames at once; want at most %d", n, takeFrames)
	}
}

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
			if !q.push(fmt.Appendf(nil, "%d", i), stop) {
				return
			}
		}
	}()
	for i := range n {
		var frame []byte
		for {
			f, ok := q.pop()
			if ok {
				frame = f
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
	if !q.push(big, stop) {
		t.Fatal("push of one large frame failed")
	}
	pushed := make(chan bool, 1)
	go func() { pushed <- q.push([]byte("x"), stop) }()
	select {
	case <-pushed:
		t.Fatal("a second frame was queued beyond the byte bound")
	case <-time.After(50 * time.Millisecond):
	}
	if f, ok := q.pop(); !ok || len(f) != len(big) {
		t.Fatalf("pop = %d bytes, %v", len(f), ok)
	}
	if ok := <-pushed; !ok {
		t.Fatal("the waiting push failed after room was made")
	}
	if f, ok := q.pop(); !ok || string(f) != "x" {
		t.Fatalf("pop = %q, %v", f, ok)
	}

	q.push(big, stop)
	go func() { pushed <- q.push([]byte("y"), stop) }()
	time.Sleep(20 * time.Millisecond)
	close(stop)
	if ok := <-pushed; ok {
		t.Error("push waiting for room returned true after stop")
	}
}

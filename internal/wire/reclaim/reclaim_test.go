package reclaim

import (
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// Releases asked for while one runs fold into one more run, and small
// buffers ask for none.
func TestRelease_Folds(t *testing.T) {
	var mu sync.Mutex
	runs := 0
	started, unblock := make(chan struct{}, 10), make(chan struct{})
	freeOSMemory = func() {
		mu.Lock()
		runs++
		mu.Unlock()
		started <- struct{}{}
		<-unblock
	}
	defer func() { freeOSMemory = debug.FreeOSMemory }()

	Release(Threshold - 1)
	select {
	case <-started:
		t.Fatal("a buffer under the threshold started a release")
	case <-time.After(50 * time.Millisecond):
	}
	Release(Threshold)
	<-started // the first run is under way
	for range 5 {
		Release(Threshold)
	}
	unblock <- struct{}{}
	<-started // the one folded run
	unblock <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for state.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the release goroutine did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if runs != 2 {
		t.Errorf("%d runs for one release and five during it, want 2", runs)
	}
}

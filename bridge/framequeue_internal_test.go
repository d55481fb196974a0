package bridge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// A link's frames reach the agent once each and in the order they were
// pushed, whatever the writer's pace; the queue reports itself over its
// bound while it holds more than the bound, and signals drained when it
// falls back under it (the loop then reads the editor again). Seeded
// random sequences against the link's writer goroutine.
func TestFrameQueueKeepsOrder(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 2))
		var mu sync.Mutex // the agent's end
		var sink []string
		var q frameQueue
		drained := make(chan struct{}, 1)
		q.init(64, drained)
		ctx, cancel := context.WithCancel(context.Background())
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			for {
				frame, ok := q.pop(ctx)
				if !ok {
					return
				}
				mu.Lock()
				sink = append(sink, string(frame))
				mu.Unlock()
				if rng2(int64(seed), len(frame))%3 == 0 {
					time.Sleep(time.Duration(len(frame)%50) * time.Microsecond)
				}
			}
		}()
		var want []string
		wasOver := false
		for range 80 {
			switch rng.IntN(3) {
			case 0, 1:
				want = append(want, fmt.Sprintf("f%d-%s", len(want)+1, strings.Repeat("x", rng.IntN(40))))
				q.push([]byte(want[len(want)-1]))
				wasOver = wasOver || q.over()
			case 2:
				time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(sink)
			mu.Unlock()
			if n == len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: %d of %d frames reached the agent", seed, n, len(want))
			}
			time.Sleep(time.Millisecond)
		}
		if q.over() {
			t.Errorf("seed %d: an empty queue reports itself over its bound", seed)
		}
		if wasOver {
			select {
			case <-drained:
			default:
				t.Errorf("seed %d: the queue went over its bound and drained, but never said so", seed)
			}
		}
		cancel()
		<-writerDone
		if got := strings.Join(sink, " "); got != strings.Join(want, " ") {
			t.Fatalf("seed %d: the agent got\n%s\nwant\n%s", seed, got, strings.Join(want, " "))
		}
	}
}

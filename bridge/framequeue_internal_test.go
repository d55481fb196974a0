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
// handed over, however they go: pushed and written at once (the direct
// path), taken in part and finished by the writer's Flush, refused and
// queued for the writer, or claimed, with more pushed, and only then
// written (inlineEditorLine, once the gate is open). Seeded random
// sequences against the link's writer goroutine.
func TestFrameQueueKeepsOrder(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 2))
		var mu sync.Mutex // the agent's end: sink and held
		var sink []string
		var held []byte
		tryRng := rand.New(rand.NewPCG(seed, 3)) // (the pushing goroutine's only)
		var q frameQueue
		q.init(1<<20, nil)
		q.direct(func(frame []byte) (taken, held2 bool) {
			mu.Lock()
			defer mu.Unlock()
			if held != nil {
				return false, false
			}
			switch tryRng.IntN(3) {
			case 0:
				return false, false // the socket is full
			case 1:
				held = frame // taken in part: Flush writes the rest
				return true, true
			}
			sink = append(sink, string(frame))
			return true, false
		})
		ctx, cancel := context.WithCancel(context.Background())
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			for {
				frame, flush, ok := q.pop(ctx)
				if !ok {
					return
				}
				mu.Lock()
				if flush {
					if held == nil {
						mu.Unlock()
						t.Errorf("seed %d: Flush with nothing held", seed)
						return
					}
					sink = append(sink, string(held))
					held = nil
				} else {
					if held != nil {
						mu.Unlock()
						t.Errorf("seed %d: frame %q written before the held %q was flushed", seed, frame, held)
						return
					}
					sink = append(sink, string(frame))
				}
				mu.Unlock()
				if rng2(int64(seed), len(frame))%3 == 0 {
					time.Sleep(time.Duration(len(frame)%50) * time.Microsecond)
				}
				q.done()
			}
		}()
		var want []string
		next := 0
		frame := func() []byte {
			next++
			want = append(want, fmt.Sprintf("f%d", next))
			return []byte(want[len(want)-1])
		}
		claims := 0
		for range 80 {
			switch rng.IntN(3) {
			case 0:
				q.push(frame())
			case 1:
				f := frame()
				if !q.claim() {
					q.push(f)
					break
				}
				claims++
				for range rng.IntN(3) {
					q.push(frame())
				}
				if rng.IntN(2) == 0 {
					time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
				}
				q.writeClaimed(f)
			case 2:
				time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n, h := len(sink), held
			mu.Unlock()
			if n == len(want) && h == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: %d of %d frames reached the agent (held %q)", seed, n, len(want), h)
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-writerDone
		if got := strings.Join(sink, " "); got != strings.Join(want, " ") {
			t.Fatalf("seed %d: the agent got\n%s\nwant\n%s", seed, got, strings.Join(want, " "))
		}
		if seed == 99 && claims == 0 {
			t.Error("the last seed claimed nothing: the test did not walk the claimed path")
		}
	}
}

package trace

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/tap"
)

var sink []byte

// BenchmarkTap measures what a trace costs the engine's loop per message
// (Tap: a copy and a channel send; encoding and writing happen on the
// writer's goroutine) and the whole trace's throughput, as ratios against
// a baseline measured in the same run: copying the message alone.
//
// On the shared, loaded 2-core test machine: loop ≈ 2-3x the copy (0.8-1.2
// µs), written ≈ 10-14x (3.5-5.5 µs/msg: 180,000-280,000 messages/s).
func BenchmarkTap(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a chunk of model output, about a line long"}}}}`)
	ev := tap.Event{Hop: tap.EditorHop, Message: msg}
	n := max(b.N, 100_000)

	t0 := time.Now()
	for range n {
		sink = bytes.Clone(msg)
	}
	clone := time.Since(t0)

	// A queue that never fills, so that loop-ns/msg is Tap's own cost;
	// written-ns/msg is the writer's throughput (with a bounded queue the
	// loop waits for it only when a flood outruns it).
	w := NewWriter(io.Discard, Options{Buffer: n})
	b.ResetTimer()
	t0 = time.Now()
	for range n {
		w.Tap(ev)
	}
	loop := time.Since(t0)
	w.Close()
	all := time.Since(t0)
	b.StopTimer()

	b.ReportMetric(float64(loop.Nanoseconds())/float64(n), "loop-ns/msg")
	b.ReportMetric(float64(all.Nanoseconds())/float64(n), "written-ns/msg")
	b.ReportMetric(float64(loop)/float64(clone), "x-clone-loop")
	b.ReportMetric(float64(all)/float64(clone), "x-clone-written")
}

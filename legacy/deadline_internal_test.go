package legacy

import (
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineRecorder is a network connection that records the deadlines set
// on it.
type deadlineRecorder struct {
	net.Conn
	reads, writes []time.Time
}

func (r *deadlineRecorder) Read(b []byte) (int, error) { return len(b), nil }
func (r *deadlineRecorder) SetReadDeadline(t time.Time) error {
	r.reads = append(r.reads, t)
	return nil
}
func (r *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	r.writes = append(r.writes, t)
	return nil
}

// The deadlines a deadlineConn keeps always hold what was asked, with at
// most a quarter of the asked distance as slack, while the network
// connection is asked to re-arm rarely: for a thousand frames written and
// read back to back, a few times, not a thousand.
func TestDeadlineConnKeepsDeadlinesWithSlack(t *testing.T) {
	const wait = time.Second
	rec := &deadlineRecorder{}
	var state atomic.Int32
	d := &deadlineConn{Conn: rec, wait: wait, state: &state}
	rng := rand.New(rand.NewPCG(1, 2))
	var last time.Time // the write deadline in force
	for i := range 1000 {
		before := time.Now()
		_, _ = d.Read(make([]byte, 1))
		if got := rec.reads[len(rec.reads)-1]; got.Before(before.Add(wait)) || got.After(time.Now().Add(wait+wait/4)) {
			t.Fatalf("read %d: deadline %v ahead, want between wait and 1.25 wait", i, got.Sub(before))
		}
		asked := time.Now().Add(wait)
		if rng.IntN(50) == 0 {
			asked = time.Now().Add(time.Duration(rng.IntN(100)) * time.Millisecond) // a ctx's or the close's shorter wait
		}
		ahead := time.Until(asked)
		_ = d.SetWriteDeadline(asked)
		if n := len(rec.writes); n > 0 {
			last = rec.writes[n-1]
		}
		if last.Before(asked) || last.Sub(asked) > ahead/4+time.Millisecond {
			t.Fatalf("write %d: asked %v ahead, the deadline in force is %v past it", i, ahead, last.Sub(asked))
		}
	}
	if len(rec.reads) > 3 {
		t.Errorf("the read deadline was set %d times for 1000 reads within a second", len(rec.reads))
	}
	if len(rec.writes) > 60 {
		t.Errorf("the write deadline was set %d times for 1000 frames (about 20 asked for a shorter one)", len(rec.writes))
	}
	// A zero deadline passes through.
	_ = d.SetWriteDeadline(time.Time{})
	if got := rec.writes[len(rec.writes)-1]; !got.IsZero() {
		t.Errorf("a zero write deadline was set as %v", got)
	}
}

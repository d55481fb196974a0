package ndjson

import (
	"runtime"
	"strings"
	"testing"
)

// A large line is handed over without a second copy, and its buffer is not
// kept afterwards: memory comes back after a big message. It has just the
// spare capacity a relay needs to lengthen an id in place.
func TestReader_LargeLineNotRetained(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	r := NewReader(strings.NewReader(big+"\nsmall\n"), 0)
	line, err := r.Next()
	if err != nil || len(line) != len(big) {
		t.Fatalf("Next = %d bytes, %v", len(line), err)
	}
	if cap(line) < len(line)+spare || cap(line) > len(line)+2+spare {
		t.Errorf("line has capacity %d for %d bytes", cap(line), len(line))
	}
	if line, err := r.Next(); err != nil || string(line) != "small" {
		t.Errorf("next line = %q, %v", line, err)
	}

}

// TestReader_LongLineCostsTwiceItsSize: a long line allocates its pieces
// and its joined copy and nothing else of size: no index grown per line
// (it held 24 KiB of garbage for 32 MiB), no copy of its last piece.
func TestReader_LongLineCostsTwiceItsSize(t *testing.T) {
	const n = 8<<20 + 12345 // not a whole number of pieces
	const reads = 5
	big := strings.Repeat("x", n)
	r := NewReader(strings.NewReader(strings.Repeat(big+"\n", 1+reads)), 0)
	if _, err := r.Next(); err != nil { // the first builds what is kept
		t.Fatal(err)
	}
	// TotalAlloc counts the whole process: the runtime (and the race
	// detector) sometimes allocate a few KiB of their own while a line is
	// read. The reader's own cost is the same every time, and others only
	// ever add to it, so the smallest of several reads is the reader's.
	least := ^uint64(0)
	for i := 0; i < reads; i++ {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		line, err := r.Next()
		runtime.ReadMemStats(&after)
		if err != nil || len(line) != n {
			t.Fatalf("Next = %d bytes, %v", len(line), err)
		}
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	pieces := n / bufSize * bufSize            // the last, partial piece is not copied
	joined := (n + spare + 8191) / 8192 * 8192 // large objects take whole pages
	if want := uint64(pieces + joined); least > want+1024 {
		t.Errorf("reading a %d-byte line allocated at least %d bytes, want %d (+1 KiB)", n, least, want)
	}
}

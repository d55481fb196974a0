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
	big := strings.Repeat("x", n)
	r := NewReader(strings.NewReader(big+"\n"+big+"\n"), 0)
	if _, err := r.Next(); err != nil { // the first builds what is kept
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	line, err := r.Next()
	runtime.ReadMemStats(&after)
	if err != nil || len(line) != n {
		t.Fatalf("Next = %d bytes, %v", len(line), err)
	}
	pieces := n / bufSize * bufSize            // the last, partial piece is not copied
	joined := (n + spare + 8191) / 8192 * 8192 // large objects take whole pages
	if got, want := after.TotalAlloc-before.TotalAlloc, uint64(pieces+joined); got > want+1024 {
		t.Errorf("reading a %d-byte line allocated %d bytes, want %d (+1 KiB)", n, got, want)
	}
}

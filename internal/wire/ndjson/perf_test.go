//go:build perf

package ndjson

// Memory measured on the whole process's heap: run alone (CI's perf step),
// not beside the package's other tests, whose garbage it would count.

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
)

// A long line does not keep the pieces it was gathered in as well: they go
// back to the OS as the line is joined (reclaim.Join), so once it is read
// the heap holds the line and at most reclaim.Threshold of its pieces
// besides, where it held the pieces and the line, twice its size.
func TestReader_LongLineGivesItsPiecesBack(t *testing.T) {
	const n = 4 * reclaim.Threshold
	r := NewReader(strings.NewReader(strings.Repeat("x", n)+"\n"), 0)
	resident := func() int64 { // the heap's pages not given back to the OS
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapSys - m.HeapReleased)
	}
	debug.FreeOSMemory()
	before := resident()
	line, err := r.Next()
	extra := resident() - before
	if err != nil || len(line) != n {
		t.Fatalf("Next = %d bytes, %v", len(line), err)
	}
	t.Logf("reading a %d MiB line kept %.2f× its size", n>>20, float64(extra)/n)
	// Kept, the pieces made it twice the line; given back, the line and
	// at most reclaim.Threshold of pieces (1.25×) and the runtime's own
	// (a few MiB, which the scavenger's timing moves): the bound lies
	// between, at 1.5×.
	if extra > n+n/2 {
		t.Errorf("reading a %d MiB line kept %.2f× its size, want its size and at most %d MiB of pieces", n>>20, float64(extra)/n, reclaim.Threshold>>20)
	}
}

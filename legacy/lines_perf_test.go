//go:build perf

package legacy

// Memory measured on the whole process's heap: run alone (CI's perf step),
// not beside the package's other tests, whose garbage it would count.

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/internal/wire/reclaim"
)

// A long line does not keep the pieces it was gathered in as well: as
// ndjson.Reader's (TestReader_LongLineGivesItsPiecesBack), they go back to
// the OS as the line is joined, so once it is read the heap holds the line
// and at most reclaim.Threshold of its pieces besides, not twice its size.
func TestLineSplitterGivesItsPiecesBack(t *testing.T) {
	const n = 4 * reclaim.Threshold
	input := []byte(strings.Repeat("x", n) + "\n")
	resident := func() int64 { // the heap's pages not given back to the OS
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapSys - m.HeapReleased)
	}
	s := lineSplitter{max: ndjson.DefaultMax}
	debug.FreeOSMemory()
	before := resident()
	var line []byte
	for rest := input; len(rest) > 0 && line == nil; {
		k := min(len(rest), pumpBufferSize)
		s.feed(rest[:k])
		rest = rest[k:]
		if l, _, r := s.next(); r == gotLine {
			line = l
		}
	}
	extra := resident() - before
	if len(line) != n {
		t.Fatalf("got a line of %d bytes, want %d", len(line), n)
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

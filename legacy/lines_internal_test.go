package legacy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
)

// splitEvent is a line, or the head of a line skipped as too long.
type splitEvent struct {
	line    string
	tooLong bool
}

// ndjsonLines reads input as the editor's side reads its stdin.
func ndjsonLines(t testing.TB, input []byte, max int) []splitEvent {
	r := ndjson.NewReader(bytes.NewReader(input), max)
	var out []splitEvent
	for {
		line, err := r.Next()
		var tooLong *ndjson.TooLongError
		switch {
		case errors.As(err, &tooLong):
			out = append(out, splitEvent{line: string(tooLong.Head), tooLong: true})
		case errors.Is(err, io.EOF):
			return out
		case err != nil:
			t.Fatalf("ndjson: %v", err)
		default:
			out = append(out, splitEvent{line: string(line)})
		}
	}
}

// splitLines reads input fed to a lineSplitter in the chunks cuts makes,
// checking on the way that every line lent stays as it was until the next
// call, and that a lent line has no room past its end.
func splitLines(t testing.TB, input []byte, max int, cuts []int) []splitEvent {
	s := lineSplitter{max: max}
	var out []splitEvent
	var lentLine []byte
	var lentCopy string
	check := func() {
		if lentLine != nil && string(lentLine) != lentCopy {
			t.Fatalf("a lent line changed before the next call: %q, was %q", lentLine, lentCopy)
		}
	}
	take := func(line []byte, lent bool, r splitResult) bool {
		switch r {
		case needChunk:
			return false
		case gotTooLong:
			out = append(out, splitEvent{line: string(line), tooLong: true})
			lentLine = nil
		default:
			out = append(out, splitEvent{line: string(line)})
			lentLine, lentCopy = nil, ""
			if lent {
				if cap(line) != len(line) {
					t.Fatalf("lent line %q has capacity %d", line, cap(line))
				}
				lentLine, lentCopy = line, string(line)
			}
		}
		return true
	}
	at := 0
	for _, cut := range append(cuts, len(input)) {
		if cut < at || cut > len(input) {
			continue
		}
		// Each chunk in memory of its own, overwritten once the splitter
		// asks for the next: a line it returned in place must not be
		// needed then.
		chunk := bytes.Clone(input[at:cut])
		at = cut
		s.feed(chunk)
		for take(s.next()) {
			check()
		}
		for i := range chunk {
			chunk[i] = '#'
		}
	}
	if line, lent, r := s.end(); take(line, lent, r) {
		check()
	}
	return out
}

func compareSplit(t *testing.T, input []byte, max int, cuts []int) {
	want := ndjsonLines(t, input, max)
	got := splitLines(t, input, max, cuts)
	if len(got) != len(want) {
		t.Fatalf("max %d, cuts %v: %d events, want %d:\n got %+v\nwant %+v", max, cuts, len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.tooLong != w.tooLong {
			t.Fatalf("max %d, cuts %v: event %d: %+v, want %+v", max, cuts, i, g, w)
		}
		if !g.tooLong && g.line != w.line {
			t.Fatalf("max %d, cuts %v: line %d: %q, want %q", max, cuts, i, g.line, w.line)
		}
		// An over-long line is reported by its first bytes: both heads
		// start the same way (ndjson's may keep the newline of a short
		// one).
		if g.tooLong {
			n := min(len(g.line), len(w.line))
			if n == 0 && len(g.line)+len(w.line) > 0 || g.line[:n] != w.line[:n] || len(g.line) > headLen {
				t.Fatalf("max %d: head %q, ndjson's %q", max, g.line, w.line)
			}
		}
	}
}

// FuzzLineSplitterAgreesWithNdjson feeds any input, cut into chunks
// anywhere, to the child's line splitter and reads it whole with
// ndjson.Reader: the same lines come out, and the same lines are skipped
// as too long.
func FuzzLineSplitterAgreesWithNdjson(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\r\n\n  \n{\"c\":3}"), uint16(100), uint64(1))
	f.Add([]byte("aaaaaaaaaa\nbbbbbbbbbbbbbbbbbbbbbbbbbbb\r\ncc\n"), uint16(5), uint64(7))
	f.Add([]byte("x\r\r\n\r\n\t\n\xff\n"), uint16(1), uint64(3))
	f.Fuzz(func(t *testing.T, input []byte, max uint16, seed uint64) {
		m := int(max%600) + 1
		rnd := rand.New(rand.NewPCG(seed, 0))
		var cuts []int
		for at := 0; at < len(input); {
			at += 1 + rnd.IntN(1+len(input)/3)
			cuts = append(cuts, at)
		}
		compareSplit(t, input, m, cuts)
	})
}

// TestLineSplitterLongLines crosses the sizes where the splitter changes
// how it gathers a line (its own buffer, then pieces) and where ndjson's
// buffer fills, with lines under and over the limit, cut into chunks as a
// pipe delivers them.
func TestLineSplitterLongLines(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for i, n := range []int{10, accMax - 1, accMax, accMax + 1, 3*accMax + 17, 5, 700 << 10, 64<<10 - 3, 1 << 20, 9} {
		b.WriteString(strings.Repeat(string(rune('a'+i)), n))
		if i%3 == 0 {
			b.WriteByte('\r')
		}
		b.WriteByte('\n')
	}
	input := []byte(b.String())
	for _, max := range []int{300 << 10, 800 << 10, ndjson.DefaultMax, accMax} {
		for _, chunk := range []int{4096, 65536, 65536 - 7, 100000} {
			var cuts []int
			for at := 0; at < len(input); {
				at += 1 + rnd.IntN(chunk)
				cuts = append(cuts, at)
			}
			compareSplit(t, input, max, cuts)
		}
	}
}

package reclaim

import (
	"bytes"
	"runtime/debug"
	"slices"
	"testing"
)

// A message's pieces hold what is written to them and can be freed in any
// order; the pool keeps heapPieces of them for the next message, no more.
func TestPieces(t *testing.T) {
	var ps []Piece
	for i := range heapPieces + 4 {
		p := NewPiece()
		p.B[0], p.B[PieceSize-1] = byte(i), byte(i)
		ps = append(ps, p)
	}
	for i, p := range ps {
		if p.B[0] != byte(i) || p.B[PieceSize-1] != byte(i) {
			t.Fatalf("piece %d lost what was written to it", i)
		}
	}
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].Free()
	}
	Piece{}.Free() // a zero Piece is nothing to free
	if n := len(pool.pieces); n != heapPieces {
		t.Errorf("the pool keeps %d pieces after a message of %d, want %d", n, len(ps), heapPieces)
	}
}

// Join copies the pieces in order, and from Threshold bytes on returns the
// memory of those copied to the OS every Threshold bytes, each of them
// dropped by then; below Threshold it never does.
func TestJoinReleasesAsItCopies(t *testing.T) {
	for _, total := range []int{Threshold - 1000, 2*Threshold + 1234} {
		var pieces []Piece
		var want []byte
		for n := total; n > 0; n -= PieceSize {
			p := NewPiece()
			clear(p.B[:])
			p.B[0], p.B[min(n, PieceSize)-1] = byte(len(pieces)), byte(len(pieces)) // (the order shows)
			want = append(want, p.B[:min(n, PieceSize)]...)
			pieces = append(pieces, p)
		}
		last := total - (len(pieces)-1)*PieceSize
		var releases []int // how many pieces were dropped at each
		freeOSMemory = func() {
			dropped := 0
			for dropped < len(pieces) && pieces[dropped] == (Piece{}) {
				dropped++
			}
			releases = append(releases, dropped)
		}
		got := Join(make([]byte, 0, total), pieces, last)
		freeOSMemory = debug.FreeOSMemory
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: joined wrong", total)
		}
		var wantReleases []int
		for k := Threshold / PieceSize; total >= Threshold && k < len(pieces); k += Threshold / PieceSize {
			wantReleases = append(wantReleases, k)
		}
		if !slices.Equal(releases, wantReleases) {
			t.Errorf("%d bytes: released with %v pieces dropped, want %v", total, releases, wantReleases)
		}
	}
}

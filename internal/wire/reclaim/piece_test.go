package reclaim

import (
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

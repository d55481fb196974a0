package reclaim

import (
	"bytes"
	"testing"
)

// A message's pieces beyond the first heapPieces are mapped where the OS
// maps memory, hold what is written to them, and can be freed in any
// order; the heap ones go back to the pool.
func TestPieces(t *testing.T) {
	var ps []Piece
	for i := range heapPieces + 4 {
		p := NewPiece(i)
		if want := i >= heapPieces && mapsPieces; p.mapped != want {
			t.Fatalf("piece %d: mapped = %v, want %v", i, p.mapped, want)
		}
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
}

// Uncleared gives room for exactly n bytes, and what is appended is the
// message, whatever the memory held before.
func TestUncleared(t *testing.T) {
	for _, n := range []int{0, 1, 100, 1 << 20} {
		b := Uncleared(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("Uncleared(%d): len %d cap %d", n, len(b), cap(b))
		}
		want := bytes.Repeat([]byte{'x'}, n)
		b = append(b, want...)
		if !bytes.Equal(b, want) {
			t.Fatalf("Uncleared(%d): appended bytes read back differently", n)
		}
		if n > 0 && &b[0] != &b[:cap(b)][0] {
			t.Fatalf("Uncleared(%d): appending moved the slice", n)
		}
	}
}

package reclaim

import (
	"sync"
)

// PieceSize is the size of the pieces a large message is gathered in
// before it is copied once into a slice of its length.
const PieceSize = 64 << 10

// heapPieces is how many pieces the pool keeps for the next large message
// (1 MiB in all); the pieces of a larger message beyond them are garbage
// once copied, which Collect, called after the copy, frees.
const heapPieces = 16

// Piece is one piece of a message being gathered.
type Piece struct {
	B *[PieceSize]byte
}

// NewPiece returns a piece for a message being gathered.
func NewPiece() Piece { return Piece{B: pool.get()} }

// Free gives p back to the pool, which keeps heapPieces of them. p must
// not be used after.
func (p Piece) Free() {
	if p.B != nil {
		pool.put(p.B)
	}
}

// pool keeps heapPieces heap pieces for the next large message, shared by
// all readers. It is capped rather than a sync.Pool, which keeps what it
// holds through a garbage collection: after a 60 MiB message the bridge
// must not hold 60 MiB of pieces until the next two.
var pool = freeList{max: heapPieces}

type freeList struct {
	mu     sync.Mutex
	max    int
	pieces []*[PieceSize]byte
}

func (f *freeList) get() *[PieceSize]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.pieces); n > 0 {
		p := f.pieces[n-1]
		f.pieces[n-1] = nil
		f.pieces = f.pieces[:n-1]
		return p
	}
	return new([PieceSize]byte)
}

func (f *freeList) put(p *[PieceSize]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pieces) < f.max {
		f.pieces = append(f.pieces, p)
	}
}

// Join appends to out the bytes of pieces, each full but the last, which
// holds last bytes, and returns out. Each piece goes (Free) as soon as it
// is copied, and from Threshold bytes on, the memory of the pieces copied
// is returned to the OS every Threshold bytes (as Now does): the message's
// slice takes its pages as the copy reaches them, so the pieces and the
// message together stay near the message's size plus Threshold rather
// than reaching twice the message. The caller calls Now before it
// allocates out, so that out is made of pages the OS gives back zeroed,
// which the runtime does not touch before the copy does.
func Join(out []byte, pieces []Piece, last int) []byte {
	if len(pieces) == 0 {
		return out
	}
	total := (len(pieces)-1)*PieceSize + last
	since := 0
	for i, p := range pieces {
		k := PieceSize
		if i == len(pieces)-1 {
			k = last
		}
		out = append(out, p.B[:k]...)
		p.Free()
		pieces[i] = Piece{}
		if since += k; total >= Threshold && since >= Threshold && i < len(pieces)-1 {
			freeOSMemory()
			since = 0
		}
	}
	return out
}

package reclaim

import (
	"strings"
	"sync"
	"unsafe"
)

// PieceSize is the size of the pieces a large message is gathered in
// before it is copied once into a slice of its length.
const PieceSize = 64 << 10

// heapPieces is how many pieces of a message come from the Go heap (and a
// pool that keeps them, 1 MiB in all); the rest of a larger message is
// gathered in pieces mapped from the OS (where the OS allows it).
//
// A heap piece, once copied into the message, is garbage until the next
// collection, and its pages are the process's until the one after: the
// pieces and the message it was joined into cost twice the message at the
// peak. A mapped piece is unmapped as soon as it is copied, so joining
// costs the message and one piece.
const heapPieces = 16

// Piece is one piece of a message being gathered.
type Piece struct {
	B      *[PieceSize]byte
	mapped bool
}

// NewPiece returns the i-th piece (from 0) of a message.
func NewPiece(i int) Piece {
	if i >= heapPieces {
		if b := mapPiece(); b != nil {
			return Piece{B: b, mapped: true}
		}
	}
	return Piece{B: pool.get()}
}

// Free gives p back: to the pool, or to the OS at once. p must not be
// used after.
func (p Piece) Free() {
	if p.B == nil {
		return
	}
	if p.mapped {
		unmapPiece(p.B)
		return
	}
	pool.put(p.B)
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

// Uncleared returns an empty slice with room for n bytes, for a message
// about to be copied into it whole. Unlike make, it does not clear the
// memory first: memory the heap reuses (a large message's, freed and
// returned to the OS) is cleared by make all at once, which brings every
// page of it back before the first byte is copied, while the pieces being
// copied are still held: twice the message again. Written as it is
// filled, the message's pages come back one piece at a time, as the
// pieces go.
func Uncleared(n int) []byte {
	// strings.Builder grows by the runtime's allocation without clearing
	// (its bytes are always written before they are read); the slice
	// takes over the builder's memory, which nothing else refers to.
	// One byte is written so that String has the memory's address.
	if n <= 0 {
		return nil
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0)
	return unsafe.Slice(unsafe.StringData(b.String()), n)[:0]
}

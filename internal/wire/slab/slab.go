// Package slab copies small messages into slices carved from larger
// blocks. A reader that returns every message in memory of its own would
// otherwise allocate once per message, and on a stream of small updates
// the allocations, and the collections they bring, cost as much as reading
// the bytes does.
//
// A carved slice is the caller's alone: no other slice overlaps it, and
// its capacity ends where it does, so appending to it moves it elsewhere
// instead of writing into its neighbour. The price is that a message kept
// for long keeps its whole block (BlockSize) alive; messages are carved
// only up to MaxCarved, so that one block serves many.
package slab

const (
	// BlockSize is the size of the blocks messages are carved from.
	BlockSize = 16 << 10
	// MaxCarved is the largest message carved from a block; a larger one
	// gets an allocation of its own.
	MaxCarved = 1 << 10
)

// Slab carves copies out of its current block. It is not safe for
// concurrent use: each reader has its own.
type Slab struct {
	block []byte
}

// Copy returns a copy of b that the caller owns.
func (s *Slab) Copy(b []byte) []byte {
	n := len(b)
	if n > MaxCarved {
		return append(make([]byte, 0, n), b...)
	}
	if s.block == nil || cap(s.block)-len(s.block) < n { // (never nil, even when empty)
		s.block = make([]byte, 0, BlockSize)
	}
	start := len(s.block)
	s.block = append(s.block, b...)
	return s.block[start:len(s.block):len(s.block)]
}

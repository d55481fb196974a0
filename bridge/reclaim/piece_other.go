//go:build !unix

package reclaim

const mapsPieces = false

// mapPiece is nil where the bridge maps no memory itself: pieces come
// from the heap.
func mapPiece() *[PieceSize]byte { return nil }

func unmapPiece(*[PieceSize]byte) {}

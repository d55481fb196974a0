//go:build unix

package reclaim

import (
	"syscall"
	"unsafe"
)

// mapsPieces says mapPiece maps memory here.
const mapsPieces = true

// mapPiece maps a piece of anonymous memory, outside the Go heap (the
// collector neither scans nor frees it), or returns nil when the OS
// refuses.
func mapPiece() *[PieceSize]byte {
	b, err := syscall.Mmap(-1, 0, PieceSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return (*[PieceSize]byte)(b)
}

// unmapPiece returns a mapped piece's memory to the OS.
func unmapPiece(p *[PieceSize]byte) {
	// syscall.Munmap accepts only slices syscall.Mmap returned, which it
	// tracks by their first byte; p is one.
	_ = syscall.Munmap(unsafe.Slice(&p[0], PieceSize))
}

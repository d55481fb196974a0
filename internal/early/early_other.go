//go:build !unix

package early

// Discard does nothing where no agent starts early.
func Discard() {}

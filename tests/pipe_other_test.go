//go:build !linux

package tests

// StdoutBlocked cannot tell here; tests that wait for a bridge blocked on
// its stdout carry on without that proof.
func (b *Bridge) StdoutBlocked() (blocked, ok bool) { return false, false }

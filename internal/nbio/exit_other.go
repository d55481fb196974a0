//go:build !linux

package nbio

// AwaitExit waits for nothing outside Linux: it reports false, and the
// caller's Wait blocks as it always did.
func AwaitExit(pid int) bool { return false }

//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix)

package procs

// StdinPollable is false where the stdio relay does not poll stdin
// (editorInput in internal/cli): the relay keeps the runtime's default Ps.
func StdinPollable() bool { return false }

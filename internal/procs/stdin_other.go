//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix)

package procs

// stdinPollable is false where the stdio relay does not poll stdin
// (editorInput in internal/cli): the relay keeps the runtime's default Ps.
func stdinPollable() bool { return false }

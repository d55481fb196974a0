//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix)

package cli

// stderrFilterCommand is reserved everywhere, so that a command line means
// the same on every system.
const stderrFilterCommand = "__stderr-filter"

// scrubStderr does nothing where fd 2 cannot be replaced: crash output is
// not scrubbed there (logs are).
func scrubStderr(secrets []string) (done func()) { return func() {} }

func stderrFilterMain() int { return 2 }

var crashTestHook func(secrets []string)

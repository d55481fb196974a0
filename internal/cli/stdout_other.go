//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix)

package cli

import "os"

// reserveStdout is a no-op where package syscall offers no dup2: the ACP
// stream is os.Stdout itself, and only the discipline of writing nothing else
// there protects it.
func reserveStdout() (*os.File, error) { return os.Stdout, nil }

// editorInput returns stdin as it is where deadlines cannot be arranged;
// it is not polled.
func editorInput() (in *os.File, polled bool) { return os.Stdin, false }

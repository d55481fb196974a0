//go:build unix

package store

import "syscall"

// oddTranscripts are the kinds of file a transcript may be that are not a
// regular file, on this platform.
var oddTranscripts = []string{"directory", "fifo", "symlink"}

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

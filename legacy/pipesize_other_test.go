//go:build !linux

package legacy_test

// stdoutPipeSize cannot be told where F_GETPIPE_SZ does not exist.
func stdoutPipeSize() int { return -1 }

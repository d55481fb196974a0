//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lock is a session's lock: an flock on its own lock file. flock locks
// belong to an open file description, so two Stores of one process
// exclude each other like two processes do, and no other descriptor of
// the process (the transcript's) can drop it by being closed. The kernel
// drops it with the process: a bridge killed leaves nothing stale.
type lock struct {
	f    *os.File
	path string
	// orphaned: the lock file was there with a holder's pid in it. A
	// holder that lets go removes its file first, so the last one ended
	// without letting go: it was killed or crashed.
	orphaned bool
}

// takeLock takes the lock at path without waiting: a *BusyError when
// another holder has it.
func takeLock(path, sid string) (*lock, error) {
	for range 100 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("session %s: lock file: %w", sid, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			pid := readHolder(f)
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, &BusyError{SessionID: sid, PID: pid}
			}
			return nil, fmt.Errorf("session %s: locking %s: %w", sid, path, err)
		}
		// A holder removes its lock file before it lets go: a lock taken
		// on a file no longer at path is no lock. Try again.
		if same(f, path) {
			orphaned := readHolder(f) > 0
			writeHolder(f)
			return &lock{f: f, path: path, orphaned: orphaned}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("session %s: lock file %s keeps changing", sid, path)
}

func same(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// release removes the lock file and lets the lock go, in that order (see
// takeLock).
func (l *lock) release() {
	os.Remove(l.path)
	l.f.Close()
}

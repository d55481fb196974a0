//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"os"
	"sync"
)

// lock is a session's lock where flock is not available: exclusive
// between the Stores of this process only. Two processes sharing a state
// directory on such a system are not kept apart.
type lock struct {
	path string
	// orphaned: whether the last holder ended without letting go is not
	// known here (no lock file): it may have.
	orphaned bool
}

var locks struct {
	sync.Mutex
	held map[string]bool
}

func takeLock(path, sid string) (*lock, error) {
	locks.Lock()
	defer locks.Unlock()
	if locks.held[path] {
		return nil, &BusyError{SessionID: sid, PID: os.Getpid()}
	}
	if locks.held == nil {
		locks.held = map[string]bool{}
	}
	locks.held[path] = true
	return &lock{path: path, orphaned: true}, nil
}

func (l *lock) release() {
	locks.Lock()
	delete(locks.held, l.path)
	locks.Unlock()
}

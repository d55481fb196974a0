package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// ErrTaken is wrapped by Create's error when the session id is already
// recorded (here or by another process): the caller picks another id.
var ErrTaken = errors.New("session id already recorded")

// ErrDeleted is wrapped by Acquire's error for a session that was recorded
// and then deleted (its id stays taken, see Create). It wraps
// fs.ErrNotExist: the session is not there.
var ErrDeleted = fmt.Errorf("the session was deleted: %w", fs.ErrNotExist)

// BusyError is Acquire's and Delete's error when another acp-bridge
// process (or another Acquire of the same Store, not yet Released) holds
// the session.
type BusyError struct {
	SessionID string
	PID       int // the holder's process id; 0 when unknown
}

func (e *BusyError) Error() string {
	who := "another acp-bridge process"
	if e.PID > 0 {
		who += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	if e.PID == os.Getpid() {
		return fmt.Sprintf("session %s is already open in this acp-bridge process (pid %d); close it first", e.SessionID, e.PID)
	}
	return fmt.Sprintf("session %s is open in %s; close it there or end that process first", e.SessionID, who)
}

// lockPath is the lock file of the session whose files are named stem.
func lockPath(dir, stem string) string { return dir + string(os.PathSeparator) + stem + ".lock" }

// readHolder returns the pid written in a lock file, 0 if none.
func readHolder(f *os.File) int {
	var b [24]byte
	n, _ := f.ReadAt(b[:], 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// writeHolder records this process as the lock's holder, for BusyError.
func writeHolder(f *os.File) {
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
}

//go:build unix

package store

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// noFollow makes an open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW

// checkOwner refuses a state directory another user owns: its owner could
// read every transcript, or plant files in it. private also refuses one
// that the group or others can access (a directory at a predictable path
// in a shared temporary directory).
func checkOwner(dir string, st fs.FileInfo, private bool) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(sys.Uid) != uid {
		return fmt.Errorf("the session state directory %s belongs to uid %d, not to you (uid %d): pass --state-dir a directory of your own", dir, sys.Uid, uid)
	}
	if private && st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the session state directory %s is accessible to other users (mode %v): remove it, or set HOME or XDG_STATE_HOME", dir, st.Mode().Perm())
	}
	return nil
}

func uid() string { return fmt.Sprint(os.Geteuid()) }

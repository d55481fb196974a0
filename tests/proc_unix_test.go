//go:build unix

package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that killGroup
// ends the agents it starts too.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills cmd's process group (see ownGroup).
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// killPID kills the process pid at once, as kill -9 does.
func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// pidAlive reports whether a process pid exists (a zombie counts).
func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// processGone reports whether pid no longer runs. A zombie counts as gone:
// it has exited, and only its (possibly non-reaping) new parent can reap it.
func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if rerr != nil {
		return os.IsNotExist(rerr)
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// stopPID stops the process pid, as SIGSTOP does: it runs no more until
// killed or continued.
func stopPID(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }

//go:build unix

package check

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the agent in a process group of its own, so that
// Close can stop whatever it started, as legacy.Process does.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func terminateGroup(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }

func killGroup(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

// signalGroup signals the agent's process group, or the agent alone when
// the group is gone (os.Process cannot hit a reused pid once reaped).
func signalGroup(p *os.Process, sig syscall.Signal) error {
	err := syscall.Kill(-p.Pid, sig)
	if err != syscall.ESRCH {
		return err
	}
	if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

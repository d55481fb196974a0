//go:build unix

package legacy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in a process group of its own, whose id is
// its pid, so that Close can signal everything the agent started
// (orphaned children are a classic bridge bug). A group of its
// own also keeps a terminal's Ctrl-C, meant for the bridge, away from it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup sends SIGTERM to the child's process group.
func terminateGroup(p *os.Process) error {
	return signalGroup(p, syscall.SIGTERM)
}

// killGroup sends SIGKILL to the child's process group.
func killGroup(p *os.Process) error {
	return signalGroup(p, syscall.SIGKILL)
}

// signalGroup signals the child's process group. If there is no such group
// (the child left it, or it is already empty) it signals the child itself,
// through os.Process, which cannot hit a reused pid once the child is
// reaped. The leader is not signalled twice: some agents treat a second
// SIGTERM as "quit without cleaning up".
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

// exitText describes how the child ended, for Read's error: "agent process
// exited with status 3", "agent process was killed by signal 9 (killed)".
func exitText(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig := ws.Signal()
		msg := fmt.Sprintf("agent process was killed by signal %d (%s)", int(sig), sig)
		if ws.CoreDump() {
			msg += ", core dumped"
		}
		return msg
	}
	return fmt.Sprintf("agent process exited with status %d", ps.ExitCode())
}

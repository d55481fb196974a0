//go:build !unix

package legacy

import (
	"fmt"
	"os"
	"os/exec"
)

// Without Unix process groups the bridge can only stop the child itself;
// grandchildren are left to the operating system.

func setProcessGroup(cmd *exec.Cmd) {}

// terminateGroup is a no-op: there is no portable polite stop signal, so the
// staged stop goes from closing stdin straight to killing after StopGrace.
func terminateGroup(p *os.Process) error { return nil }

func killGroup(p *os.Process) error {
	err := p.Kill()
	if err == os.ErrProcessDone {
		return nil
	}
	return err
}

// exitText describes how the child ended, for Read's error: "agent process
// exited with status 3".
func exitText(ps *os.ProcessState) string {
	return fmt.Sprintf("agent process exited with status %d", ps.ExitCode())
}

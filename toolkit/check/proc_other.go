//go:build !unix

package check

import (
	"os"
	"os/exec"
)

// Without Unix process groups only the agent itself can be stopped.

func setProcessGroup(cmd *exec.Cmd) {}

func terminateGroup(p *os.Process) error { return nil }

func killGroup(p *os.Process) error {
	if err := p.Kill(); err != nil && err != os.ErrProcessDone {
		return err
	}
	return nil
}

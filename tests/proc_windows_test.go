package tests

import (
	"os"
	"os/exec"
)

// ownGroup is a no-op on Windows: killGroup kills the process alone.
func ownGroup(cmd *exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// killPID kills the process pid at once.
func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// pidAlive reports whether a process pid exists: Windows opens a handle
// only to a process that does.
func pidAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

// processGone reports whether pid no longer runs.
func processGone(pid int) bool { return !pidAlive(pid) }

// stopPID does nothing on Windows, which cannot stop a process from
// outside; the tests that stop an agent kill it right after.
func stopPID(pid int) error { return nil }

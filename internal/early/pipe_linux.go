package early

import (
	"os"
	"syscall"
)

// growPipe gives the agent's stdout pipe the room legacy.Command.Start
// gives it with nbio.GrowPipe (childPipeBytes; nbio imports package net,
// which initializes late). Best effort, as there.
func growPipe(f *os.File) {
	const fSetPipeSize, size = 1031, 256 << 10 // F_SETPIPE_SZ
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, size) })
	}
}

package nbio

import (
	"os"
	"syscall"
)

// sysPidfdOpen is pidfd_open(2)'s number on every Linux architecture
// (it came after the numbering was unified), which package syscall lacks.
const sysPidfdOpen = 434

// AwaitExit waits until the child process pid has exited, parked in the
// runtime's poller on a pidfd rather than in a blocking system call, and
// reports whether it could; it does not reap the child. Call it before
// os/exec's Wait, which then returns at once.
//
// Why: Wait blocks in waitid(2), and a goroutine in a blocking system
// call keeps its P until sysmon takes it back, a tick after it sees the
// call: up to 10 ms once sysmon has backed off, which it does whenever
// nothing ran for a millisecond. On the one P the stdio relay runs on,
// nothing else runs meanwhile. The goroutine that waits for a child
// agent enters Wait soon after the agent starts, so an editor's first
// answer, relayed while that P was stuck, came up to 10 ms late (about
// one start in two, on a 2-CPU VM).
//
// It returns false at once where pidfds are not there (Linux before
// 5.3), and the caller's Wait blocks as it always did.
func AwaitExit(pid int) bool {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		return false
	}
	// Non-blocking, os.NewFile puts it in the poller (a pidfd polls
	// readable once its process has exited).
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		syscall.Close(int(fd))
		return false
	}
	f := os.NewFile(fd, "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	// The first call asks the poller to wait; the second comes once the
	// pidfd is readable. Were a wake-up ever early, the caller's Wait
	// would block as it does without AwaitExit: slower, never wrong.
	asked := false
	err = rc.Read(func(uintptr) bool {
		done := asked
		asked = true
		return done
	})
	return err == nil
}

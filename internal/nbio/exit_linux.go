package nbio

import (
	"encoding/binary"
	"os"
	"syscall"
	"unsafe"
)

// sysPidfdOpen is pidfd_open(2)'s number on every Linux architecture
// (it came after the numbering was unified), which package syscall lacks.
const sysPidfdOpen = 434

// waitid(2)'s idtype and options that package syscall lacks.
const (
	pPID    = 1          // P_PID
	wExited = 4          // WEXITED
	wNowait = 0x01000000 // WNOWAIT
)

// exited reports whether the child pid has exited, leaving it to be
// reaped (WNOWAIT). With WNOHANG and nothing to report, waitid fills the
// siginfo with zeros, so its first field, si_signo, is SIGCHLD exactly
// when the child has exited (on every architecture: it comes first).
func exited(pid int) bool {
	var info [128]byte // a siginfo_t
	_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), syscall.WNOHANG|wExited|wNowait, 0, 0)
	if errno != 0 {
		return true // not a child of ours to wait for: Wait will say why
	}
	return int32(binary.NativeEndian.Uint32(info[:4])) == int32(syscall.SIGCHLD)
}

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
	// Read calls exited, and while it is false waits for the pidfd to
	// poll readable and calls it again. The poller's readiness cannot be
	// trusted alone: Read clears what the poller saw before it began, and
	// a pidfd polls readable only as its process exits (edge-triggered),
	// so a child that had exited already would be waited for forever.
	err = rc.Read(func(uintptr) bool { return exited(pid) })
	return err == nil
}

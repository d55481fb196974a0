package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// StdoutBlocked reports whether the bridge can write no more to its stdout:
// the editor stopped reading and the pipe is full (the bytes waiting in it
// reach its capacity), or a thread of the bridge is blocked in a write(2) to
// it. The bridge writes stdout in non-blocking mode through Go's poller, so
// the first is what usually shows. ok is false when neither can be told.
func (b *Bridge) StdoutBlocked() (blocked, ok bool) {
	var st syscall.Stat_t
	rc, err := b.outR.SyscallConn()
	if err != nil {
		return false, false
	}
	var queued, size int
	var qerr error
	measure := func(fd uintptr) {
		var n int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
			qerr = e
			return
		}
		queued = int(n)
		const fGetPipeSz = 1032 // F_GETPIPE_SZ, fcntl(2)
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSz, 0)
		if e != 0 {
			qerr = e
			return
		}
		size = int(r)
	}
	_ = rc.Control(measure)
	// A writer can stop short of the capacity (pages partly used by earlier
	// writes), so "full" is: at least half full, and not draining or
	// filling any more.
	if first := queued; qerr == nil && size > 0 && first >= size/2 {
		time.Sleep(50 * time.Millisecond)
		_ = rc.Control(measure)
		if qerr == nil && queued == first {
			return true, true
		}
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil || serr != nil {
		return false, false
	}
	pipe := fmt.Sprintf("pipe:[%d]", st.Ino)
	proc := fmt.Sprintf("/proc/%d", b.Pid())
	fds := map[uint64]bool{} // the bridge's descriptors of that pipe
	ents, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return false, false
	}
	for _, ent := range ents {
		if dst, err := os.Readlink(filepath.Join(proc, "fd", ent.Name())); err == nil && dst == pipe {
			n, _ := strconv.ParseUint(ent.Name(), 10, 64)
			fds[n] = true
		}
	}
	tasks, err := os.ReadDir(proc + "/task")
	if err != nil || len(fds) == 0 {
		return false, false
	}
	for _, task := range tasks {
		// "NR ARG0 …" while the thread is in a system call.
		raw, err := os.ReadFile(filepath.Join(proc, "task", task.Name(), "syscall"))
		if err != nil {
			return false, false
		}
		f := strings.Fields(string(raw))
		if len(f) < 2 || f[0] != strconv.Itoa(syscall.SYS_WRITE) {
			continue
		}
		if fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64); err == nil && fds[fd] {
			return true, true
		}
	}
	return false, true
}

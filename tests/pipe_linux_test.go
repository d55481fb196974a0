package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// StdoutBlocked reports whether a thread of the bridge is blocked in a
// write(2) to its stdout pipe: the editor stopped reading and the pipe is
// full. ok is false when /proc cannot tell (not readable, or the bridge
// writes stdout without blocking a thread).
func (b *Bridge) StdoutBlocked() (blocked, ok bool) {
	var st syscall.Stat_t
	rc, err := b.outR.SyscallConn()
	if err != nil {
		return false, false
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

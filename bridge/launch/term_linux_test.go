package launch

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// A pseudo-terminal is a terminal: NewProgress gives a Progress on it.
func TestNewProgressOnTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal on this machine: %v", err)
	}
	defer ptmx.Close()
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	t.Setenv("TERM", "xterm")
	if NewProgress(pts) == nil {
		t.Error("NewProgress(pseudo-terminal) is nil")
	}
}

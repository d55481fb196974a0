// Package nbio reads and writes a pipe or a socket in non-blocking mode
// with system calls the Go scheduler is not told about.
//
// Why: Go's poller already puts pipes and sockets in non-blocking mode, so
// a read or a write on one returns at once (EAGAIN when it would wait, and
// then the goroutine waits in the poller). Yet every such call goes through
// the runtime's entersyscall and exitsyscall, and entersyscall wakes the
// runtime's monitor thread (sysmon) when it sleeps because no goroutine
// ran. A relay that waits for its agent between bursts of a stream puts
// sysmon to sleep and wakes it again thousands of times a second: each
// wake is a futex call and a context switch, and a woken sysmon polls
// every 20 µs for at least a millisecond. On the one P the stdio relay
// runs on, a call that sysmon sees lasting over 20 µs (a 30 KiB write
// that wakes the editor) also has its P taken and handed to another
// thread, which finds nothing to do. In perf of a stream through a child
// agent, sysmon was a sixth of the bridge's samples.
//
// A call that cannot block needs none of that, which is what
// syscall.RawSyscall is for. OpenFile and OpenConn serve only
// descriptors whose calls cannot block: pipes and sockets in non-blocking
// mode. A regular file's read or write can wait for the disk whatever its
// mode, so the session store's writes keep the scheduler's system calls.
//
// GrowPipe gives a stream's pipe more room than the kernel's default, so
// that a fast writer meets a full pipe less often.
//
// Elsewhere than on Linux, they return nil and callers keep the file or
// the connection they had (GrowPipe does nothing). Under the race
// detector the calls are the syscall package's, which tell the detector
// what the kernel read and wrote; everything else is the same.
package nbio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// File reads and writes one descriptor, as the *os.File or net.Conn it was
// opened from does, with the same deadlines and the same errors. One Read
// at a time and one Write or TryWrite at a time; a Read may run alongside
// a Write.
type File struct {
	rc   syscall.RawConn
	slow io.ReadWriter // what File was opened from, for its own errors
	wrap func(op string, errno syscall.Errno) error

	rmu   sync.Mutex // Read's state, kept here so that readFD is made once
	rb    []byte
	rn    int
	rerr  syscall.Errno
	rdo   func(fd uintptr) bool
	wmu   sync.Mutex // Write's and TryWrite's
	wb    []byte
	wn    int
	werr  syscall.Errno
	wonce bool // TryWrite: one attempt, never wait
	wdo   func(fd uintptr) bool
}

// OpenFile returns a File for f when f is a pipe or a socket in
// non-blocking mode that Go's poller serves; else nil.
func OpenFile(f *os.File) *File {
	name := f.Name()
	return open(f, f, func(op string, errno syscall.Errno) error {
		return &os.PathError{Op: op, Path: name, Err: errno}
	})
}

// OpenConn returns a File for c when c is a socket in non-blocking mode
// that Go's poller serves (a TCP or Unix connection from package net);
// else nil.
func OpenConn(c net.Conn) *File {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	return open(sc, c, func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
	})
}

func open(sc syscall.Conn, slow io.ReadWriter, wrap func(string, syscall.Errno) error) *File {
	if !supported {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	ok := false
	if rc.Control(func(fd uintptr) { ok = cannotBlock(int(fd)) }) != nil || !ok {
		return nil
	}
	f := &File{rc: rc, slow: slow, wrap: wrap}
	f.rdo = f.readFD
	f.wdo = f.writeFD
	return f
}

// Read reads into b as the file or connection's Read does: at most
// len(b) bytes, waiting in the poller (and honouring the read deadline)
// while there are none; io.EOF at the end.
func (f *File) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return f.slow.Read(b)
	}
	f.rmu.Lock()
	f.rb = b
	err := f.rc.Read(f.rdo)
	n, errno := f.rn, f.rerr
	f.rb, f.rn, f.rerr = nil, 0, 0
	f.rmu.Unlock()
	switch {
	case err != nil:
		// Closed, or past the read deadline: the descriptor's own
		// Read reports it as it always does, at once.
		return f.slow.Read(b)
	case errno != 0:
		return 0, f.wrap("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readFD makes the read: true when it is done, false to wait until the
// descriptor is readable.
func (f *File) readFD(fd uintptr) bool {
	for {
		n, errno := read(fd, f.rb)
		switch errno {
		case 0:
			f.rn = n
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			f.rerr = errno
			return true
		}
	}
}

// Write writes all of b as the file or connection's Write does, waiting
// in the poller (and honouring the write deadline) while the descriptor
// takes nothing more.
func (f *File) Write(b []byte) (int, error) {
	n, errno, err := f.write(b, false)
	switch {
	case err != nil:
		m, err := f.slow.Write(b[n:])
		return n + m, err
	case errno != 0:
		return n, f.wrap("write", errno)
	}
	return n, nil
}

// TryWrite makes one attempt to write b and returns how much of it the
// descriptor took, possibly nothing (0 and no error): it never waits. Its
// errors are the poller's and the system call's, unwrapped.
func (f *File) TryWrite(b []byte) (int, error) {
	n, errno, err := f.write(b, true)
	switch {
	case err != nil:
		return n, err
	case errno != 0 && errno != syscall.EAGAIN:
		return n, errno
	}
	return n, nil
}

// write writes b through the descriptor's RawConn (writeFD), once or until
// all of it is written; err is the poller's, errno the system call's.
func (f *File) write(b []byte, once bool) (n int, errno syscall.Errno, err error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.wb, f.wonce = b, once
	err = f.rc.Write(f.wdo)
	n, errno = f.wn, f.werr
	f.wb, f.wn, f.werr = nil, 0, 0
	return n, errno, err
}

// writeFD writes what is left of wb: true when it is done (all written, an
// error, or TryWrite's one attempt made), false to wait until the
// descriptor is writable.
func (f *File) writeFD(fd uintptr) bool {
	for len(f.wb) > 0 {
		n, errno := write(fd, f.wb)
		switch errno {
		case 0:
			f.wn += n
			f.wb = f.wb[n:]
			if f.wonce {
				return true
			}
		case syscall.EINTR:
		case syscall.EAGAIN:
			return f.wonce
		default:
			f.werr = errno
			return true
		}
	}
	return true
}

//go:build !linux

package nbio

import "syscall"

// Only Linux is served: elsewhere OpenFile and OpenConn return nil.
const supported = false

func read(uintptr, []byte) (int, syscall.Errno)  { return 0, syscall.ENOSYS }
func write(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }

func cannotBlock(int) bool { return false }

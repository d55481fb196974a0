//go:build !linux

// Package pipesize grows a pipe's kernel buffer where the system allows it
// (Linux's F_SETPIPE_SZ); elsewhere it does nothing.
package pipesize

import "os"

// Grow does nothing where pipes cannot be resized, and reports false.
func Grow(f *os.File, size int) bool { return false }

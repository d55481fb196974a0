// Package reclaim keeps a large message from costing more memory than it
// must. The bridge's buffers are plain Go slices, so the garbage a large
// message leaves (the chunks it was read in, the message itself once
// written) is freed only by the next garbage collection, and the collector's
// pacer lets garbage grow as large as what is live before it runs one. For a
// 32 MiB message that is tens of MiB more at the peak, and a second large
// message (an answer arriving while its request is still being written)
// stacks on the first one's garbage: 2.0–3.0 times the message, depending
// on when the pacer happened to run.
//
// So the readers, which gather a large message in pieces (Piece) and then
// copy it once into a slice of its size, return the free memory to the OS
// just before that allocation (Now), and while they copy, return the
// pieces copied so far every Threshold bytes (Join): the message's slice
// takes its pages as the copy reaches them, and the pieces give theirs
// back, so the peak is the message and Threshold more rather than twice
// the message, whatever ran before. Whoever drops the last reference to a
// large buffer asks for a collection that also returns its pages to the
// OS, in the background (Release).
//
// Both act only from Threshold bytes: below it the pacer does better than
// any forced collection, and small messages never pay for one.
package reclaim

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
)

// Threshold is the size from which a buffer is worth a collection.
const Threshold = 8 << 20

// Collect runs a garbage collection now when n >= Threshold. It blocks its
// caller for the collection: about a millisecond, since the heap's large
// objects are byte slices, which the collector does not scan; small beside
// reading n bytes.
func Collect(n int) {
	if n >= Threshold {
		runtime.GC()
	}
}

// Now collects and returns the memory freed to the OS now, when n >=
// Threshold: before a slice of n bytes is made to join a message into (see
// Join). It blocks its caller for the collection, as Collect does, and for
// returning the pages, which the message's slice then takes from the OS
// untouched, page by page as the copy reaches them, rather than as memory
// the runtime zeroes first.
func Now(n int) {
	if n >= Threshold {
		freeOSMemory()
	}
}

// state is 0 when no release runs, 1 when one runs, 2 when one runs and
// another was asked for meanwhile.
var state atomic.Int32

// Release is called by the goroutine that has just dropped its last
// reference to a buffer of n bytes. From Threshold on it starts a
// collection that returns the freed memory to the OS, in the background so
// that the caller goes on at once. Calls made while one runs are folded
// into one more run after it.
func Release(n int) {
	if n < Threshold {
		return
	}
	for {
		switch state.Load() {
		case 0:
			if state.CompareAndSwap(0, 1) {
				go release()
				return
			}
		case 1:
			if state.CompareAndSwap(1, 2) {
				return
			}
		default:
			return
		}
	}
}

// freeOSMemory is debug.FreeOSMemory, replaced in tests.
var freeOSMemory = debug.FreeOSMemory

func release() {
	for {
		freeOSMemory()
		if state.CompareAndSwap(1, 0) {
			return
		}
		state.Store(1) // asked again meanwhile: once more
	}
}

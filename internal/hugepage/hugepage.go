// Package hugepage gives a stream's long-lived buffers their memory from
// one region backed by a transparent huge page, where the system allows
// it, so that a bridge's first turn takes one page fault for them instead
// of one for each of their 4 KiB pages.
//
// A turn through the bridge runs its bytes through a few buffers that
// live as long as the process: the child agent's read buffers, the
// editor writer's blocks, a link's batch, the session store's arenas and
// its run of records, about 1.5 MB in all. Go gives them fresh pages,
// which the first turn touches one by one: some 380 page faults, where
// the naive relay, which reuses one buffer, takes 7. On the
// paravirtualised VM measured each such fault costs 25-32 µs (touching
// 350 fresh pages took 8.7-11.3 ms of CPU, one 2 MiB huge page mostly
// 0.2-0.4 ms), and a first turn of 200,000 updates through a child cost
// the bridge 16% more CPU for them.
//
// The region is mapped, and its memory handed out, only once Start has
// been called, when a first prompt starts: an idle bridge, or one that
// never streams, never has the huge page in its resident set. Memory from
// the region is never given back or reused: it is for buffers their
// owners keep (and reuse) for good. A buffer its owner drops is lost to
// the region, which is harmless: the region is one huge page, and when it
// has no room left, or could not be mapped, or the system has no
// transparent huge pages, Bytes takes memory from the Go heap as any
// make would.
package hugepage

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Size is the region's size: one huge page on x86-64 and arm64 (4 KiB
// base pages).
const Size = 2 << 20

var (
	started atomic.Bool
	mu      sync.Mutex
	mapped  bool   // the region was mapped (or mapping it failed)
	region  []byte // its memory not yet handed out: [len, cap) is free
	// base is the region's address once mapped, for Owns.
	base atomic.Uintptr
)

// Start lets Bytes hand out the region's memory from now on.
func Start() { started.Store(true) }

// Started reports whether Start has been called: whether Bytes hands out
// the region's memory.
func Started() bool { return started.Load() }

// Bytes returns an empty slice with room for n bytes: the region's memory
// once Start has been called and while it has room, else the Go heap's.
// Appending past its capacity moves it to the heap, as for any slice, and
// never into the memory of another.
func Bytes(n int) []byte {
	if n > 0 && started.Load() {
		mu.Lock()
		if !mapped {
			mapped = true
			region = mapRegion()
			if cap(region) > 0 {
				base.Store(uintptr(unsafe.Pointer(unsafe.SliceData(region))))
			}
		}
		if at := len(region); cap(region)-at >= n {
			region = region[:at+n]
			b := region[at : at : at+n]
			mu.Unlock()
			return b
		}
		mu.Unlock()
	}
	return make([]byte, 0, n)
}

// Owns reports whether b's memory is the region's (a buffer whose owner
// need not drop it to give memory back: the huge page stays either way).
func Owns(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	p, first := uintptr(unsafe.Pointer(unsafe.SliceData(b))), base.Load()
	return first != 0 && p >= first && p < first+Size
}

//go:build perf

package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// The point of the region: a turn's buffers, touched page by page as a
// first turn touches them, take one page fault, not one per 4 KiB page.
func TestRegionFaultsInOnce(t *testing.T) {
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if !strings.Contains(string(thp), "[always]") && !strings.Contains(string(thp), "[madvise]") {
		t.Skipf("this kernel gives no transparent huge pages on request (%q)", strings.TrimSpace(string(thp)))
	}
	reset()
	Start()
	// As a first turn through a child: the store's two arenas, the
	// pump's buffers, the editor writer's blocks and a link's batch.
	var bufs [][]byte
	for _, n := range []int{384 << 10, 384 << 10, 64 << 10, 64 << 10, 64 << 10} {
		bufs = append(bufs, Bytes(n))
	}
	for range 12 {
		bufs = append(bufs, Bytes(32<<10))
	}
	runtime.LockOSThread() // the faults counted are this thread's
	defer runtime.UnlockOSThread()
	before := threadFaults(t)
	pages := 0
	for _, b := range bufs {
		if !Owns(b) {
			t.Fatalf("a %d-byte buffer is not the region's", cap(b))
		}
		b = b[:cap(b)]
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
			pages++
		}
	}
	faults := threadFaults(t) - before
	t.Logf("%d pages touched: %d page faults", pages, faults)
	// One for the huge page; under the race detector, a few more for its
	// shadow of the region. Without the huge page, one a page (345).
	if faults > int64(pages/8) {
		t.Errorf("touching %d pages of the region took %d page faults, want one or a few", pages, faults)
	}
	if kb := hugeKB(t, addr(bufs[0])); kb != Size>>10 {
		t.Errorf("the region's mapping has %d kB of huge pages, want %d", kb, Size>>10)
	}
}

func threadFaults(t *testing.T) int64 {
	t.Helper()
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// hugeKB is the AnonHugePages of the mapping that holds p, from
// /proc/self/smaps.
func hugeKB(t *testing.T, p uintptr) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= p && p < hi
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			fmt.Sscanf(strings.TrimPrefix(line, "AnonHugePages:"), "%d", &kb)
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x", p)
	return 0
}

package tests

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The bridge reads the editor's stdin in the mode the editor gave it: a
// blocking pipe stays blocking, so the reading thread wakes straight from
// the kernel at each request instead of through Go's poller (about 5 µs of
// every round trip, docs/performance.md). The editor here hands it a
// blocking pipe, as os/exec and libuv do.
func TestStdin_KeptBlocking(t *testing.T) {
	t.Parallel()
	e := NewEditor(t, ChildTransport("acp"), EditorOptions{})
	e.Initialize(t)
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/0", e.Pid()))
	if err != nil {
		t.Skipf("cannot read the bridge's descriptor flags: %v", err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatalf("fdinfo flags %q: %v", v, err)
			}
			if flags&0o4000 != 0 { // O_NONBLOCK
				t.Errorf("the bridge made its stdin non-blocking (flags %#o)", flags)
			}
			return
		}
	}
	t.Fatalf("no flags in fdinfo: %s", info)
}

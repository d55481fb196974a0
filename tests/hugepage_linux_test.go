package tests

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A turn's buffers (the child's read buffers, the editor writer's blocks,
// the link's batch, the store's arenas) share one transparent huge page,
// which an idle bridge never faults in: a first turn then takes one page
// fault for them instead of one per 4 KiB page (350 of them, 20-25 µs
// each on a paravirtualised VM), and the idle footprint stays as it was.
// Checked on the built binary as an editor starts it, from its smaps.
func TestFirstTurn_BuffersShareOneHugePage(t *testing.T) {
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if !strings.Contains(string(thp), "[always]") && !strings.Contains(string(thp), "[madvise]") {
		t.Skipf("this kernel gives no transparent huge pages on request (%q)", strings.TrimSpace(string(thp)))
	}
	t.Parallel()
	agent := ChildTransport("acp").Start(t)
	b := StartBridge(t, agent.Args, agent.Env, nil)
	rawInit(t, b)
	sid := rawNewSession(t, b, `"new"`)
	time.Sleep(100 * time.Millisecond)
	if kb := anonHugeKB(t, b.Pid()); kb != 0 {
		t.Errorf("an idle bridge holds %d kB of huge pages, want none", kb)
	}

	b.WriteLine(rawPrompt(`"turn"`, sid, "stream 20000"))
	if l := responseBy(t, b.Out, `"turn"`, time.Now().Add(WaitTimeout)); l.Get("result.stopReason").Str != "end_turn" {
		t.Fatalf("the turn ended with %s", l)
	}
	if kb := anonHugeKB(t, b.Pid()); kb < 2048 {
		t.Errorf("after a turn of 20,000 updates the bridge holds %d kB of huge pages, want its buffers' 2048", kb)
	}
}

// anonHugeKB sums the AnonHugePages of process pid's mappings.
func anonHugeKB(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "AnonHugePages:"); ok {
			var kb int
			fmt.Sscanf(rest, "%d", &kb)
			total += kb
		}
	}
	return total
}

package launch

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// TestServingAGoDialectCompilesNoProfile checks, in a fresh process, that
// what serving a Go dialect runs before the agent is started (Configure
// and the secrets for the scrubber) does not compile the shipped rule
// profiles: that took some 10 ms of every start-up and a megabyte of idle
// memory, for dialects nobody asked for. It counts the allocations of a
// first Configure and Secrets; compiling the profiles makes tens of
// thousands.
func TestServingAGoDialectCompilesNoProfile(t *testing.T) {
	if os.Getenv("ACP_BRIDGE_TEST_FRESH") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), "ACP_BRIDGE_TEST_FRESH=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("in a fresh process: %v\n%s", err, out)
		}
		return
	}
	for _, name := range []string{"acp", "acp-v0", "acp-v2", "claude-stream-json", "codex-app-server"} {
		spec := Agent{Name: "x", Dialect: name, Command: &legacy.Command{Path: "/bin/true"}}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, _, err := Configure(spec, nil, io.Discard); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		spec.Secrets()
		runtime.ReadMemStats(&after)
		if n := after.Mallocs - before.Mallocs; n > 2000 {
			t.Errorf("configuring dialect %s and reading its secrets made %d allocations: the rule profiles were compiled for a Go dialect", name, n)
		}
	}
}

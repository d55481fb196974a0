package tests

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The profiling switches documented for contributors work on the binary as
// an editor runs it: with ACP_BRIDGE_CPUPROFILE and ACP_BRIDGE_ALLOCPROFILE
// in its environment, a bridge that relayed an initialize to its agent and saw its input end
// leaves a CPU profile and an allocation profile, each a gzipped pprof
// protobuf that names its sample types; and a profile that cannot be
// created is said on stderr without keeping the editor from its agent.
func TestProfilingSwitches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cpu, allocs := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "allocs.prof")
	agent := ChildTransport("acp").Start(t)
	env := append([]string{"ACP_BRIDGE_CPUPROFILE=" + cpu, "ACP_BRIDGE_ALLOCPROFILE=" + allocs}, agent.Env...)
	b := StartBridge(t, agent.Args, env, nil)
	initialized(t, b)
	b.In.Close()
	if _, ok := b.WaitExit(10 * time.Second); !ok {
		t.Fatal("the bridge did not exit after its input ended")
	}
	for _, p := range []struct{ path, sampleType string }{{cpu, "cpu"}, {allocs, "alloc_objects"}} {
		raw, err := os.ReadFile(p.path)
		if err != nil {
			t.Fatalf("no profile: %v", err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s is not a gzipped pprof profile: %v", p.path, err)
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", p.path, err)
		}
		// The profile's string table holds its sample types' names.
		if !bytes.Contains(body, []byte(p.sampleType)) {
			t.Errorf("%s does not name the sample type %q: not the profile asked for", p.path, p.sampleType)
		}
	}

	// A profile that cannot be written is reported, and the bridge serves.
	bad := filepath.Join(dir, "missing", "allocs.prof")
	b = StartBridge(t, agent.Args, append([]string{"ACP_BRIDGE_ALLOCPROFILE=" + bad}, agent.Env...), nil)
	initialized(t, b)
	b.In.Close()
	if _, ok := b.WaitExit(10 * time.Second); !ok {
		t.Fatal("the bridge did not exit after its input ended")
	}
	if !bytes.Contains([]byte(b.Stderr()), []byte("ACP_BRIDGE_ALLOCPROFILE")) {
		t.Errorf("an allocation profile that cannot be created was not reported on stderr:\n%s", b.Stderr())
	}
}

// initialized has b relay an initialize to its agent and the answer back.
func initialized(t *testing.T, b *Bridge) {
	t.Helper()
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if l := b.Next(10 * time.Second); l.ID() != "1" || !l.Get("result").Exists() {
		t.Fatalf("initialize: got %s", l)
	}
}

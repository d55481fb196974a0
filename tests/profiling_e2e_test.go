package tests

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The profiling switches documented for contributors work on the binary as
// an editor runs it. With ACP_BRIDGE_CPUPROFILE in its environment, a
// bridge that relayed an initialize and saw its input end leaves a CPU
// profile. ACP_BRIDGE_ALLOCPROFILE needs a binary built with -tags
// allocprofile (the default binary would pay for it in memory at every
// run): the default one says so on stderr and serves on, the tagged one
// leaves an allocation profile. Each profile is a gzipped pprof protobuf
// that names its sample type; a profile that cannot be created is said on
// stderr without keeping the editor from its agent.
func TestProfilingSwitches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := ChildTransport("acp").Start(t)
	run := func(bin string, env ...string) *Bridge {
		t.Helper()
		b := StartBridgeBinary(t, bin, agent.Args, append(env, agent.Env...), nil)
		initialized(t, b)
		b.In.Close()
		if _, ok := b.WaitExit(10 * time.Second); !ok {
			t.Fatal("the bridge did not exit after its input ended")
		}
		return b
	}

	cpu := filepath.Join(dir, "cpu.prof")
	b := run(BridgeBin, "ACP_BRIDGE_CPUPROFILE="+cpu, "ACP_BRIDGE_ALLOCPROFILE="+filepath.Join(dir, "none.prof"))
	checkProfile(t, cpu, "cpu")
	if _, err := os.Stat(filepath.Join(dir, "none.prof")); err == nil {
		t.Error("the default binary wrote an allocation profile")
	}
	if !strings.Contains(b.Stderr(), "-tags allocprofile") {
		t.Errorf("the default binary, asked for an allocation profile, did not say how to get one:\n%s", b.Stderr())
	}

	tagged := filepath.Join(dir, "acp-bridge-allocprofile")
	build := exec.Command("go", "build", "-tags", "allocprofile", "-o", tagged, "github.com/acp-bridge/acp-bridge")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags allocprofile: %v\n%s", err, out)
	}
	allocs := filepath.Join(dir, "allocs.prof")
	run(tagged, "ACP_BRIDGE_ALLOCPROFILE="+allocs)
	checkProfile(t, allocs, "alloc_objects")
	b = run(tagged, "ACP_BRIDGE_ALLOCPROFILE="+filepath.Join(dir, "missing", "allocs.prof"))
	if !strings.Contains(b.Stderr(), "cannot create the allocation profile") {
		t.Errorf("an allocation profile that cannot be created was not reported on stderr:\n%s", b.Stderr())
	}
}

// checkProfile fails t unless path holds a gzipped pprof profile whose
// string table names sampleType.
func checkProfile(t *testing.T, path, sampleType string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no profile: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s is not a gzipped pprof profile: %v", path, err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Contains(body, []byte(sampleType)) {
		t.Errorf("%s does not name the sample type %q: not the profile asked for", path, sampleType)
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

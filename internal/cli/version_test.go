package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/buildinfo"
)

// buildBridge builds the acp-bridge binary into a temporary directory with
// the given extra `go build` arguments and returns its path.
func buildBridge(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "acp-bridge")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, args...), "github.com/acp-bridge/acp-bridge")...)
	// GOFLAGS as these machines and many CI runners set it: no VCS stamp.
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", args, err, out)
	}
	return bin
}

// versionOf runs `bin version` and `bin version --json`.
func versionOf(t *testing.T, bin string) (line string, info buildinfo.Info) {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	other, err := exec.Command(bin, "--version").Output()
	if err != nil || string(other) != string(out) {
		t.Errorf("--version = %q (%v), version = %q", other, err, out)
	}
	js, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil {
		t.Fatalf("version --json printed %q: %v", js, err)
	}
	return string(out), info
}

// Built with -buildvcs=false and no -ldflags, the binary says it cannot be
// identified, and still names its Go version and platform.
func TestVersion_BuiltWithoutStamp(t *testing.T) {
	line, info := versionOf(t, buildBridge(t))
	want := "acp-bridge dev (no VCS stamp: built with -buildvcs=false or outside a checkout; " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if line != want {
		t.Errorf("version = %q\nwant      %q", line, want)
	}
	if info.Version != "dev" || info.Stamp != "none" || info.Revision != "" || info.Note == "" ||
		info.GoVersion != runtime.Version() || info.OS != runtime.GOOS || info.Arch != runtime.GOARCH {
		t.Errorf("version --json = %+v", info)
	}
}

// A release build stamped with -ldflags -X reports the stamp, in the line
// and as JSON.
func TestVersion_BuiltWithLdflags(t *testing.T) {
	const pkg = "github.com/acp-bridge/acp-bridge/internal/buildinfo"
	const rev = "0123456789abcdef0123456789abcdef01234567"
	bin := buildBridge(t, "-ldflags", "-X "+pkg+".version=v1.2.3 -X "+pkg+".revision="+rev+" -X "+pkg+".buildTime=2026-11-26T01:02:03Z")
	line, info := versionOf(t, bin)
	want := "acp-bridge v1.2.3 (revision " + rev + ", 2026-11-26T01:02:03Z; " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if line != want {
		t.Errorf("version = %q\nwant      %q", line, want)
	}
	wantInfo := buildinfo.Info{Version: "v1.2.3", Revision: rev, Time: "2026-11-26T01:02:03Z", Stamp: "ldflags",
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if info != wantInfo {
		t.Errorf("version --json = %+v\nwant             %+v", info, wantInfo)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The dry run's work on the host's platform (CI's own, so the binary can
// be run): the archive and SHA256SUMS verify, the archive holds a static
// binary for the platform with the licence, and the binary reports the
// version and revision it was stamped with. .ci/run runs the dry run over
// every platform.
func TestBuild_HostTargetVerifies(t *testing.T) {
	host := Target{runtime.GOOS, runtime.GOARCH}
	if _, err := parseTargets(host.String()); err != nil {
		t.Fatalf("the tests run on %s, which releases do not support: %v", host, err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := Source{Revision: "0123456789abcdef0123456789abcdef01234567", Time: time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)}
	dist := t.TempDir()
	var log, progress bytes.Buffer
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func() time.Time { clock = clock.Add(1500 * time.Millisecond); return clock }
	arts, err := Build(Options{Root: root, Dist: dist, Version: "v9.8.7-test.1", Source: src, Targets: []Target{host}, Log: &log, Progress: &progress, Now: tick})
	if err != nil {
		t.Fatal(err)
	}
	// A line as the platform's build starts, one when it ends with its
	// time, one for the archive: a build of six platforms that takes
	// minutes says what it is doing.
	wantProgress := "release: building " + host.String() + " (1 of 1) …\n" +
		"release: building " + host.String() + " done in 1.5s\n" +
		"release: archive " + filepath.Join(dist, "acp-bridge_9.8.7-test.1_"+host.OS+"_"+host.Arch+map[bool]string{true: ".zip", false: ".tar.gz"}[host.OS == "windows"]) + " written in 1.5s\n"
	if progress.String() != wantProgress {
		t.Errorf("progress:\n%s\nwant:\n%s", progress.String(), wantProgress)
	}
	if err := Verify(dist, arts); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	ext := ".tar.gz"
	if host.OS == "windows" {
		ext = ".zip"
	}
	wantName := "acp-bridge_9.8.7-test.1_" + host.OS + "_" + host.Arch + ext
	if len(arts) != 1 || arts[0].Name != wantName || !strings.Contains(log.String(), wantName) {
		t.Fatalf("artifacts = %+v, log %q; want one named %s", arts, log.String(), wantName)
	}
	sums, err := os.ReadFile(filepath.Join(dist, sumsFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := arts[0].SHA256 + "  " + wantName + "\n"; string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q (the format sha256sum -c reads)", sums, want)
	}

	// The packed binary runs and names its build.
	files, err := readArchive(filepath.Join(dist, wantName))
	if err != nil {
		t.Fatal(err)
	}
	// It carries the pages the README links to, so its links work there.
	readme := string(files["README.md"])
	for _, m := range regexp.MustCompile(`\]\((docs/[a-z0-9-]+\.md)`).FindAllStringSubmatch(readme, -1) {
		if _, ok := files[m[1]]; !ok {
			t.Errorf("the archive lacks %s, which its README links to", m[1])
		}
	}
	bin := filepath.Join(t.TempDir(), host.exe())
	if err := os.WriteFile(bin, files[host.exe()], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("the packed binary's version --json: %v", err)
	}
	var info struct{ Version, Revision, Time, Stamp string }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("version --json printed %q: %v", out, err)
	}
	if info.Version != "v9.8.7-test.1" || info.Revision != src.Revision || info.Time != "2026-11-26T01:02:03Z" || info.Stamp != "ldflags" {
		t.Errorf("the packed binary says %+v; want the stamp it was built with", info)
	}

	// install.sh installs from these archives, served as a release is.
	testInstallScript(t, root, dist, host, "9.8.7-test.1")

	// Packing is reproducible: the same binary and revision give the same
	// bytes.
	again := t.TempDir()
	a2, err := pack(Options{Root: root, Dist: again, Version: "v9.8.7-test.1", Source: src}, host, bin)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(filepath.Join(again, a2.Name))
	a3, err := pack(Options{Root: root, Dist: t.TempDir(), Version: "v9.8.7-test.1", Source: src}, host, bin)
	if err != nil || a3.SHA256 != a2.SHA256 || len(b1) == 0 {
		t.Errorf("packing twice gave %s and %s (%v)", a2.SHA256, a3.SHA256, err)
	}

	// Verify notices an archive that does not match its checksum, and a
	// binary for another architecture.
	body, _ := os.ReadFile(filepath.Join(dist, wantName))
	body[len(body)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(dist, wantName), body, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dist, arts); err == nil || !strings.Contains(err.Error(), "SHA256SUMS says") {
		t.Errorf("Verify of a corrupted archive = %v, want a checksum mismatch", err)
	}
	other := Target{host.OS, map[string]string{"amd64": "arm64", "arm64": "amd64"}[host.Arch]}
	if err := checkBinary(other, files[host.exe()]); err == nil {
		t.Errorf("checkBinary(%s) accepted a %s binary", other, host)
	}
}

func TestParseTargets(t *testing.T) {
	ts, err := parseTargets("linux/amd64, windows/arm64")
	if err != nil || len(ts) != 2 || ts[1] != (Target{"windows", "arm64"}) || ts[1].exe() != "acp-bridge.exe" {
		t.Errorf("parseTargets = %v, %v", ts, err)
	}
	for _, bad := range []string{"", "plan9/386", "linux"} {
		if _, err := parseTargets(bad); err == nil || !strings.Contains(err.Error(), "linux/amd64") {
			t.Errorf("parseTargets(%q) = %v, want an error listing the supported platforms", bad, err)
		}
	}
}

func TestVersions(t *testing.T) {
	for v, ok := range map[string]bool{"v1.2.3": true, "v0.1.0-rc.1": true, "1.2.3": false, "v1.2": false, "v01.2.3": false, "vX": false} {
		if validVersion(v) != ok {
			t.Errorf("validVersion(%q) = %v", v, !ok)
		}
	}
	s := Source{Revision: "4b60e94a8e5f8da19f58694091f58807c992b017", Modified: true}
	if got := s.snapshotVersion(); got != "v0.0.0-snapshot.4b60e94a8e5f.modified" || !validVersion(got) {
		t.Errorf("snapshotVersion = %q", got)
	}
	if got := (Source{}).snapshotVersion(); got != "v0.0.0-snapshot" {
		t.Errorf("snapshotVersion outside a checkout = %q", got)
	}
}

// Usage errors name what is wrong before anything is built.
func TestRun_UsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"publish"}, {"release"}, {"release", "1.2"}, {"-targets", "plan9/386", "check"}} {
		err := run(args, &bytes.Buffer{}, &bytes.Buffer{})
		if _, ok := err.(usageError); !ok {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

// testInstallScript runs the one-line installer (install.sh at the
// repository's root) against dist, the archives and SHA256SUMS of a
// release, served over HTTP as GitHub serves a release's files: the binary
// lands in the directory asked for and runs; a release whose archive does
// not match its checksum installs nothing and says why.
func testInstallScript(t *testing.T, root, dist string, host Target, version string) {
	t.Helper()
	if host.OS == "windows" {
		return // the script is for Linux and macOS; Windows takes the .zip
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run install.sh with")
	}
	// The release served, swapped below for a corrupted one while the
	// server runs: through an atomic, since its handler runs on the
	// server's goroutines.
	var release atomic.Value // http.Handler
	release.Store(http.FileServer(http.Dir(dist)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release.Load().(http.Handler).ServeHTTP(w, r)
	}))
	defer srv.Close()
	start := time.Now()
	defer func() { t.Logf("install.sh, three runs: %v", time.Since(start).Round(time.Millisecond)) }()
	install := func(dir string, args ...string) (string, error) {
		cmd := exec.Command(sh, append([]string{filepath.Join(root, "install.sh"), "--dir", dir}, args...)...)
		cmd.Env = append(os.Environ(), "ACP_BRIDGE_RELEASE_URL="+srv.URL, "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	dir := filepath.Join(t.TempDir(), "bin")
	out, err := install(dir, "--version", "v"+version)
	if err != nil {
		t.Fatalf("install.sh: %v\n%s", err, out)
	}
	got, err := exec.Command(filepath.Join(dir, "acp-bridge"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), version) {
		t.Fatalf("the installed binary's --version: %q, %v; want it to name %s (install.sh said %q)", got, err, version, out)
	}
	if st, err := os.Stat(filepath.Join(dir, "acp-bridge")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("installed binary: %v, %v; want mode 0755", st, err)
	}
	if out, err := install(filepath.Join(t.TempDir(), "bin"), "--version", "v0.0.1"); err == nil || !strings.Contains(out, "is not v0.0.1") {
		t.Errorf("install.sh --version v0.0.1 from a %s release: %v\n%s; want a refusal", version, err, out)
	}

	// The same release with a corrupted archive: nothing is installed.
	bad := t.TempDir()
	entries, _ := os.ReadDir(dist)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".tar.gz") {
			b[len(b)/2] ^= 0xff
		}
		if err := os.WriteFile(filepath.Join(bad, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	release.Store(http.FileServer(http.Dir(bad)))
	dir = filepath.Join(t.TempDir(), "bin")
	out, err = install(dir)
	if err == nil || !strings.Contains(out, "checksum mismatch") || !strings.Contains(out, "nothing was installed") {
		t.Errorf("install.sh of a corrupted archive: %v\n%s; want a checksum mismatch", err, out)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("install.sh of a corrupted archive left %v in %s", left, dir)
	}
}

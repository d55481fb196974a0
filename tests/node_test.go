package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The npm packages some tests run: the official TypeScript ACP SDK, to run
// agents built on it (tests/testdata/sdkagent). Installed once per version
// into a cache directory shared by test runs; .ci/run installs it ahead of
// the tests, into the same place.
const (
	// SDKPackage is the npm package of the TypeScript ACP SDK.
	SDKPackage = "@agentclientprotocol/sdk"
	// SDKVersion is the version the tests pin.
	SDKVersion = "2.4.0"
	// EnvNPMCache overrides where npm packages for the tests are installed
	// (default: the user cache directory's acp-bridge/npm).
	EnvNPMCache = "ACP_BRIDGE_NPM_CACHE"
)

var sdkInstall struct {
	once      sync.Once
	node, dir string
	err       error
}

// NodeSDK returns the node binary and the directory holding node_modules
// with SDKPackage@SDKVersion, installing the package (once per test binary,
// and once per machine: the install is cached) if needed. When node, npm or
// the npm registry is not available it fails the test under CI (CI set in
// the environment: CI must have them) and skips it elsewhere, saying how to
// install them.
//
// Node resolves an ES module's imports next to the module's own file, not
// through NODE_PATH; NodeScript places a script where its imports resolve.
func NodeSDK(t testing.TB) (node, dir string) {
	t.Helper()
	sdkInstall.once.Do(func() {
		sdkInstall.node, sdkInstall.dir, sdkInstall.err = installSDK()
	})
	if err := sdkInstall.err; err != nil {
		msg := fmt.Sprintf("%v\nThis test runs agents built on the TypeScript ACP SDK. Install Node.js 18 or later with npm "+
			"(Debian: apt-get install nodejs npm), then either let the tests install the SDK or run\n"+
			"  npm install --no-audit --no-fund --prefix %s %s@%s",
			err, sdkDir(), SDKPackage, SDKVersion)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return sdkInstall.node, sdkInstall.dir
}

// NodeScript copies the script src (a path relative to the tests package)
// into a fresh directory whose node_modules is the SDK's, and returns the
// argv that runs it: node and the copy's path.
func NodeScript(t testing.TB, src string) []string {
	t.Helper()
	node, dir := NodeSDK(t)
	code, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	script := filepath.Join(run, filepath.Base(src))
	if err := os.WriteFile(script, code, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(run, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return []string{node, script}
}

// sdkDir is where SDKPackage@SDKVersion is (to be) installed.
func sdkDir() string {
	root := os.Getenv(EnvNPMCache)
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "acp-bridge", "npm")
	}
	return filepath.Join(root, "sdk-"+SDKVersion)
}

// installSDK finds node and npm and makes sure the SDK is installed in
// sdkDir. The install goes to a temporary directory renamed into place, so
// that concurrent test runs never see half an install.
func installSDK() (node, dir string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("node not found on PATH: %w", err)
	}
	dir = sdkDir()
	if sdkInstalled(dir) {
		return node, dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "", fmt.Errorf("%s@%s is not installed in %s and npm is not on PATH: %w", SDKPackage, SDKVersion, dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--prefix", tmp, SDKPackage+"@"+SDKVersion)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("npm install %s@%s failed (is the npm registry reachable?): %v\n%s", SDKPackage, SDKVersion, err, out.String())
	}
	if err := os.Rename(tmp, dir); err != nil && !sdkInstalled(dir) {
		return "", "", fmt.Errorf("moving the SDK install into %s: %w", dir, err)
	}
	if !sdkInstalled(dir) {
		return "", "", fmt.Errorf("npm installed %s@%s but %s does not hold it", SDKPackage, SDKVersion, dir)
	}
	return node, dir, nil
}

// sdkInstalled reports whether dir's node_modules holds SDKVersion of the SDK.
func sdkInstalled(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(SDKPackage), "package.json"))
	if err != nil {
		return false
	}
	var p struct{ Version string }
	return json.Unmarshal(b, &p) == nil && strings.TrimSpace(p.Version) == SDKVersion
}

package tests

// The real Codex CLI for the codex-app-server tests: @openai/codex at
// CodexVersion from npm, whose native binary comes in
// @openai/codex-linux-x64. Installed once per machine into the npm cache
// directory the other npm packages use (.ci/run installs it ahead of the
// tests); ACP_BRIDGE_CODEX names another binary. Every test runs it against
// the loopback fake of the Responses API in tests/fakeresponses, with a
// CODEX_HOME of its own.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeresponses"
)

const (
	// CodexPackage and CodexVersion are the Codex CLI the tests pin.
	CodexPackage = "@openai/codex"
	CodexVersion = "0.169.0"
	// EnvCodex names a codex executable to test instead of the pinned one.
	EnvCodex = "ACP_BRIDGE_CODEX"
	// codexKeyEnv is the environment variable the fake provider's key is
	// read from (config.toml's env_key).
	codexKeyEnv = "CODEX_FAKE_API_KEY"
)

var codexInstall struct {
	once sync.Once
	bin  string
	err  error
}

// CodexCLI returns the codex executable, installing the pinned version
// from npm once if needed. Without it (no npm, no registry) the test fails
// under CI and is skipped elsewhere, saying how to install it.
func CodexCLI(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(EnvCodex); bin != "" {
		return bin
	}
	codexInstall.once.Do(func() { codexInstall.bin, codexInstall.err = installCodex() })
	if err := codexInstall.err; err != nil {
		msg := fmt.Sprintf("%v\nThis test runs the real Codex CLI %s. Install Node.js with npm, then either let the tests install it or run\n"+
			"  npm install --no-audit --no-fund --prefix %s %s@%s\n(or set %s to a codex executable)",
			err, CodexVersion, codexDir(), CodexPackage, CodexVersion, EnvCodex)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return codexInstall.bin
}

// codexDir is where the pinned Codex is (to be) installed.
func codexDir() string {
	return filepath.Join(filepath.Dir(sdkDir()), "codex-"+CodexVersion)
}

// codexBinary is the native codex binary under dir's node_modules (the npm
// package's bin is a node script that starts it), or "".
func codexBinary(dir string) string {
	m, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@openai", "codex-*", "vendor", "*", "bin", "codex"))
	if len(m) == 0 {
		m, _ = filepath.Glob(filepath.Join(dir, "node_modules", "@openai", "codex", "vendor", "*", "codex", "codex"))
	}
	if len(m) == 0 {
		return ""
	}
	out, err := exec.Command(m[0], "--version").Output()
	if err != nil || !strings.Contains(string(out), CodexVersion) {
		return ""
	}
	return m[0]
}

func installCodex() (string, error) {
	dir := codexDir()
	if bin := codexBinary(dir); bin != "" {
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%s@%s is not installed in %s and npm is not on PATH: %w", CodexPackage, CodexVersion, dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "--prefix", tmp, CodexPackage+"@"+CodexVersion)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install %s@%s failed (is the npm registry reachable?): %v\n%s", CodexPackage, CodexVersion, err, out.String())
	}
	if err := os.Rename(tmp, dir); err != nil && codexBinary(dir) == "" {
		return "", fmt.Errorf("moving the Codex install into %s: %w", dir, err)
	}
	if bin := codexBinary(dir); bin != "" {
		return bin, nil
	}
	return "", fmt.Errorf("npm installed %s@%s but %s holds no codex binary of that version", CodexPackage, CodexVersion, dir)
}

// codexEnv starts the fake Responses API and returns the environment a
// codex process needs to use it: a fresh CODEX_HOME (0700) with its
// config.toml, and the fake key.
func codexEnv(t testing.TB) (*fakeresponses.Server, []string) {
	t.Helper()
	api := fakeresponses.Start()
	t.Cleanup(api.Close)
	home := filepath.Join(t.TempDir(), "codex-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(api.ConfigTOML(codexKeyEnv)), 0o600); err != nil {
		t.Fatal(err)
	}
	return api, []string{"CODEX_HOME=" + home, codexKeyEnv + "=sk-fake-codex-key", "RUST_LOG=error", "NO_COLOR=1"}
}

package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runIn runs the built binary in dir and returns its stdout, stderr and
// whether it exited 0.
func runIn(t *testing.T, dir string, args ...string) (stdout, stderr string, ok bool) {
	t.Helper()
	cmd := exec.Command(BridgeBin, args...)
	cmd.Dir = dir
	cmd.Env = hermeticEnv(t, nil)
	cmd.Stdin = strings.NewReader("")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

// A profile lives in a file of its own: `dialects new NAME` writes one that
// compiles as it is (and never overwrites), --profile FILE adds and selects
// it, a configuration includes it, and a mistake in it is reported at its
// file:line:column whichever way it was loaded.
func TestProfileFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, errOut, ok := runIn(t, dir, "dialects", "new", "mychat")
	if !ok || !strings.Contains(out, "wrote mychat.hcl") {
		t.Fatalf("dialects new: ok=%v\n%s%s", ok, out, errOut)
	}
	if _, errOut, ok := runIn(t, dir, "dialects", "new", "mychat"); ok || !strings.Contains(errOut, "already exists") {
		t.Errorf("a second dialects new overwrote the file, or did not say why not: ok=%v %s", ok, errOut)
	}
	if _, errOut, ok := runIn(t, dir, "dialects", "new", "acp"); ok || !strings.Contains(errOut, "built into acp-bridge") {
		t.Errorf("dialects new acp: ok=%v %s", ok, errOut)
	}
	out, errOut, ok = runIn(t, dir, "dialects", "--profile", "mychat.hcl")
	if !ok || !strings.Contains(out, "mychat") || !strings.Contains(out, "user") {
		t.Errorf("dialects with --profile does not list mychat as a user dialect: ok=%v\n%s%s", ok, out, errOut)
	}
	if out, errOut, ok := runIn(t, dir, "dialects", "show", "--profile", "mychat.hcl", "mychat"); !ok || !strings.Contains(out, `turn.sent.chat_id`) {
		t.Errorf("dialects show of a profile file: ok=%v\n%s%s", ok, out, errOut)
	}
	cfg := filepath.Join(dir, "config.hcl")
	if err := os.WriteFile(cfg, []byte("dialect \"mychat\" {\n  include = \"mychat.hcl\"\n}\n\nagent \"mine\" {\n  dialect = \"mychat\"\n  websocket {\n    url = \"ws://127.0.0.1:9/\"\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, ok := runIn(t, dir, "config", "validate", "--config", cfg); !ok {
		t.Errorf("config validate of a config including the scaffold: %s%s", out, errOut)
	}
	for _, cmd := range [][]string{{"dialects"}, {"config", "validate"}, {"config", "show"}} {
		args := append(cmd, "--config", cfg, "--profile", "mychat.hcl")
		if _, errOut, ok := runIn(t, dir, args...); ok || !strings.Contains(errOut, "Dialect declared twice") {
			t.Errorf("%v: --profile naming a dialect the configuration declares: ok=%v %s", args, ok, errOut)
		}
	}
	// config validate checks a profile file alone, or with a configuration.
	if out, errOut, ok := runIn(t, dir, "config", "validate", "--profile", "mychat.hcl"); !ok || out != "ok: 0 agents, profile mychat\n" {
		t.Errorf("config validate --profile of the scaffold: ok=%v\n%s%s", ok, out, errOut)
	}
	if out, errOut, ok := runIn(t, dir, "config", "validate", "--json", "--profile", "mychat.hcl"); !ok || !strings.Contains(out, `"profile": "mychat.hcl"`) || !strings.Contains(out, `"ok": true`) {
		t.Errorf("config validate --json --profile of the scaffold: ok=%v\n%s%s", ok, out, errOut)
	}
	other := filepath.Join(dir, "other.hcl")
	if err := os.WriteFile(other, []byte("agent \"mine\" {\n  dialect = \"mychat\"\n  websocket {\n    url = \"ws://127.0.0.1:9/\"\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, ok := runIn(t, dir, "config", "validate", "--config", other, "--profile", "mychat.hcl"); !ok || out != "ok: 1 agent, profile mychat\n" {
		t.Errorf("config validate of an agent of the --profile dialect: ok=%v\n%s%s", ok, out, errOut)
	}

	// The same typo, loaded both ways, is reported in the profile file.
	src, err := os.ReadFile(filepath.Join(dir, "mychat.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(string(src), "message = prompt.text", "message = prompt.txt", 1)
	if typo == string(src) {
		t.Fatal("the scaffold no longer sends prompt.text; update this test")
	}
	if err := os.WriteFile(filepath.Join(dir, "mychat.hcl"), []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	line := 1 + strings.Count(typo[:strings.Index(typo, "prompt.txt")], "\n")
	at := "mychat.hcl:" + strconv.Itoa(line) + ":"
	for _, args := range [][]string{
		{"--profile", "mychat.hcl", "--url", "ws://127.0.0.1:9/"},
		{"config", "validate", "--config", cfg},
		{"config", "validate", "--profile", "mychat.hcl"},
		{"config", "show", "--profile", "mychat.hcl"},
		{"dialects", "--profile", "mychat.hcl"},
	} {
		_, errOut, ok := runIn(t, dir, args...)
		if ok || !strings.Contains(errOut, at) || !strings.Contains(errOut, "Unknown variable") {
			t.Errorf("%v: ok=%v, want an Unknown variable error at %s:\n%s", args, ok, at, errOut)
		}
	}
	out, _, ok = runIn(t, dir, "config", "validate", "--json", "--profile", "mychat.hcl")
	if ok || !strings.Contains(out, `"summary": "Unknown variable"`) || !strings.Contains(out, `"file": "mychat.hcl"`) || !strings.Contains(out, `"line": `+strconv.Itoa(line)) {
		t.Errorf("config validate --json --profile: ok=%v, want an Unknown variable error at %s:\n%s", ok, at, out)
	}
	for _, args := range [][]string{
		{"--profile", "nope.hcl", "--url", "ws://127.0.0.1:9/"},
		{"config", "validate", "--profile", "nope.hcl"},
	} {
		if _, errOut, ok := runIn(t, dir, args...); ok || !strings.Contains(errOut, "nope.hcl") || !strings.Contains(errOut, "dialects new") {
			t.Errorf("%v: --profile of a missing file: ok=%v %s", args, ok, errOut)
		}
	}
}

package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
)

// repoRoot is the module root, the directory above tests/.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's install-from-clone commands work as written: `go install .`
// (into GOBIN, here a temporary one) and `go build -o ~/bin/acp-bridge .`
// (with a temporary directory for ~/bin) each give a binary that runs
// `version`, whose output `--version` repeats, and whose help goes to
// stdout for `acp-bridge --help | grep url`.
func TestREADME_InstallFromClone(t *testing.T) {
	text := readme(t)
	for _, line := range []string{"go install .  ", "go build -o ~/bin/acp-bridge .", "go run . demo", "go test -race -count=1 -timeout 30m ./..."} {
		if !strings.Contains(text, line) {
			t.Fatalf("README lacks the command %q this test exercises", line)
		}
	}
	gobin, home := t.TempDir(), t.TempDir()
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-buildvcs=false")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, errb.String())
		}
		return out.String()
	}
	root := repoRoot(t)
	run(root, "go", "install", ".")
	built := filepath.Join(home, "bin", "acp-bridge")
	run(root, "go", "build", "-o", built, ".")
	for _, bin := range []string{filepath.Join(gobin, "acp-bridge"), built} {
		v := run(root, bin, "version")
		if !strings.HasPrefix(v, "acp-bridge ") || strings.Count(v, "\n") != 1 {
			t.Errorf("%s version = %q", bin, v)
		}
		if v2 := run(root, bin, "--version"); v2 != v {
			t.Errorf("--version = %q, version = %q", v2, v)
		}
		if help := run(root, bin, "--help"); !strings.Contains(help, "--url URL") {
			t.Errorf("--help on stdout lacks --url:\n%s", help)
		}
	}
}

// The README's first command, the demo, works through the built binary.
func TestREADME_Demo(t *testing.T) {
	cmd := exec.Command(BridgeBin, "demo")
	cmd.Env = hermeticEnv(t, nil)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "turn   cancelled") {
		t.Errorf("demo output:\n%s", out.String())
	}
	// stderr is a pipe here, not a terminal: no progress noise.
	if strings.Contains(errb.String(), "… demo:") || strings.Contains(errb.String(), "\x1b[") {
		t.Errorf("progress written to a pipe:\n%q", errb.String())
	}
}

// Every message the README's troubleshooting table is keyed by is one the
// bridge prints: a fragment of it is in the source, so a reworded message
// fails here until the table follows.
func TestREADME_TroubleshootingMessagesExist(t *testing.T) {
	text := readme(t)
	start := strings.Index(text, "## Troubleshooting")
	if start < 0 {
		t.Fatal("README has no Troubleshooting section")
	}
	table := text[start:]
	if end := strings.Index(table[3:], "\n## "); end >= 0 {
		table = table[:end+3]
	}
	var src strings.Builder
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tests" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			src.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	code := src.String()
	// Values the README fills in (a URL, a duration, a quoted name) are
	// format verbs in the source: compare the text between them.
	// Library text around the bridge's own (": " joins causes, ". "
	// sentences) splits too.
	split := regexp.MustCompile(`…|"[^"]*"|ws://\S*|--[a-z-]+|\b\d+s?\b|\bN\b|NAME|config\.hcl:12:5|: |\. `)
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		cell := strings.SplitN(line, " | ", 2)[0]
		found := false
		var tried []string
		for _, msg := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
			for _, frag := range split.Split(msg[1], -1) {
				frag = strings.TrimSpace(frag)
				if len(frag) < 12 {
					continue
				}
				tried = append(tried, frag)
				if strings.Contains(code, frag) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("no fragment of this row's message is in the source: %q (tried %q)", cell, tried)
		}
	}
	if rows < 10 {
		t.Errorf("only %d message rows in the troubleshooting table", rows)
	}
}

// The walk-through of docs/bridge-your-agent.md ends with a check of the
// bridged agent. Run as written (the configuration in its default place,
// the agent a fake Tinychat that refuses the stop and goes on, as in the
// walk-through's leaking cancel), every mandatory scenario passes: among
// them cancel, which fails on an update after the cancelled answer.
func TestDocs_CheckTinychat(t *testing.T) {
	t.Parallel()
	const command = "acp-bridge check -- acp-bridge --agent tinychat"
	page, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "bridge-your-agent.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "```sh\n"+command+"\n```") {
		t.Fatalf("docs/bridge-your-agent.md lacks the command %q in a sh block", command)
	}
	src, err := os.ReadFile("testdata/tinychat.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s := StartWSAgent(t, fakeagent.WSOptions{Serve: fakerules.Tinychat})
	cfg := strings.Replace(string(src), "ws://127.0.0.1:9000/", s.URL, 1)
	if cfg == string(src) {
		t.Fatal("testdata/tinychat.hcl does not serve ws://127.0.0.1:9000/ as docs/bridge-your-agent.md says")
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "acp-bridge"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "acp-bridge", "config.hcl"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	args := strings.Fields(command)[2:] // runCheck adds "check --json"
	args[slices.Index(args, "acp-bridge")] = BridgeBin
	rep, code, out := runCheck(t, []string{"XDG_CONFIG_HOME=" + home}, args...)
	if code != 0 || rep.Failed {
		t.Errorf("%s: exit %d", command, code)
	}
	for _, r := range rep.Results {
		if r.Tier == "mandatory" && r.Status != "PASS" {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	if rep.status("cancel") != "PASS" {
		t.Errorf("cancel: %s, want PASS", rep.status("cancel"))
	}
	if t.Failed() {
		t.Logf("check output:\n%s", out)
	}
}

// CI runs exactly the test command the README gives a newcomer: the
// README's first code block's `go test` line is the line .ci/run runs
// after saying so.
func TestREADME_TestCommandIsWhatCIRuns(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "go test ") {
			want, _, _ = strings.Cut(line, "#")
			want = strings.TrimSpace(want)
			break
		}
	}
	if want == "" {
		t.Fatal("README gives no go test command")
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ci), "\n")
	found := false
	for i, line := range lines {
		if strings.HasPrefix(line, "# The README's test command, verbatim") {
			for _, next := range lines[i+1:] {
				if strings.HasPrefix(next, "go test ") {
					if next != want {
						t.Errorf(".ci/run runs %q, the README gives %q", next, want)
					}
					found = true
					break
				}
			}
		}
	}
	if !found {
		t.Errorf(".ci/run has no go test line after its \"# The README's test command, verbatim\" comment")
	}
}

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// commandPath is one command of the tree, by the words that run it.
type commandPath struct {
	words []string
	cmd   *cli.Command // nil for the root
	flags []cli.Flag
	subs  []*cli.Command
}

func (p commandPath) name() string {
	if len(p.words) == 0 {
		return "acp-bridge"
	}
	return strings.Join(p.words, " ")
}

// everyCommand walks the command tree the binary is built from.
func everyCommand() []commandPath {
	app := newApp()
	out := []commandPath{{flags: app.Flags, subs: app.Commands}}
	var walk func(words []string, cmds []*cli.Command)
	walk = func(words []string, cmds []*cli.Command) {
		for _, c := range cmds {
			w := append(slices.Clone(words), c.Name)
			out = append(out, commandPath{words: w, cmd: c, flags: c.Flags, subs: c.Subcommands})
			walk(w, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	return out
}

// visibleFlags are the long names a command's help must list.
func visibleFlags(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		names = append(names, f.Names()[0])
	}
	return names
}

// transpose swaps two letters in the middle of s: a typo one edit away.
func transpose(s string) string {
	b := []byte(s)
	i := len(b) / 2
	b[i-1], b[i] = b[i], b[i-1]
	return string(b)
}

// Every command and subcommand behaves as the top level does: a mistyped
// subcommand or flag is a usage error (status 2, stderr, the right
// suggestion, nothing on stdout); arguments a command does not take are
// refused; --help lists exactly the flags the command takes.
func TestEveryCommandConsistent(t *testing.T) {
	optionLine := regexp.MustCompile(`^\s+--([a-z][a-z0-9-]*)`)
	for _, p := range everyCommand() {
		t.Run(p.name(), func(t *testing.T) {
			t.Parallel()
			usageError := func(t *testing.T, args []string, want string) {
				t.Helper()
				stdout, stderr, code := runSelf(t, nil, args...)
				if code != 2 || stdout != "" {
					t.Errorf("%q: exit status %d, stdout %q; want 2 and nothing", args, code, stdout)
				}
				if !strings.Contains(stderr, want) {
					t.Errorf("%q: stderr lacks %q:\n%s", args, want, stderr)
				}
				if want := "Run 'acp-bridge " + strings.Join(append(slices.Clone(p.words), "--help"), " ") + "' for usage."; !strings.Contains(stderr, want) {
					t.Errorf("%q: stderr does not point to %q:\n%s", args, want, stderr)
				}
			}
			// A mistyped subcommand.
			for _, sub := range p.subs {
				if len(sub.Name) >= 4 {
					usageError(t, append(slices.Clone(p.words), transpose(sub.Name)), `Did you mean "`+sub.Name+`"?`)
					break
				}
			}
			// A mistyped flag, and one like none.
			var longest string
			for _, n := range visibleFlags(p.flags) {
				if len(n) > len(longest) && n != "help" {
					longest = n
				}
			}
			if len(longest) >= 4 {
				usageError(t, append(slices.Clone(p.words), "--"+transpose(longest)), "Did you mean --"+longest+"?")
			}
			usageError(t, append(slices.Clone(p.words), "--zqxjkv"), "unknown flag --zqxjkv")
			// Unexpected arguments.
			switch {
			case p.cmd == nil:
				usageError(t, []string{"zqxjkv"}, `"zqxjkv" is not a subcommand`)
			case len(p.subs) > 0:
				usageError(t, append(slices.Clone(p.words), "zqxjkv"), `"zqxjkv" is not a subcommand of `+p.name())
			case strings.HasPrefix(p.cmd.ArgsUsage, "[-- "):
				usageError(t, append(slices.Clone(p.words), "zqxjkv"), "An agent command goes after --")
			case p.cmd.ArgsUsage == "":
				usageError(t, append(slices.Clone(p.words), "zqxjkv"), p.name()+" takes no arguments")
			}
			// --help: the command's flags, only them.
			stdout, stderr, code := runSelf(t, nil, append(slices.Clone(p.words), "--help")...)
			if code != 0 || stderr != "" {
				t.Errorf("--help: exit status %d, stderr %q; want 0 and nothing", code, stderr)
			}
			listed := map[string]bool{}
			inOptions := false
			for _, line := range strings.Split(stdout, "\n") {
				if strings.HasSuffix(line, "OPTIONS:") {
					inOptions = true
					continue
				}
				if m := optionLine.FindStringSubmatch(line); inOptions && m != nil {
					listed[m[1]] = true
				}
			}
			want := visibleFlags(p.flags)
			for _, n := range want {
				if !listed[n] && len(n) > 1 {
					t.Errorf("--help does not list --%s:\n%s", n, stdout)
				}
			}
			for n := range listed {
				if !slices.Contains(want, n) && n != "help" && n != "version" {
					t.Errorf("--help lists --%s, which %s does not take", n, p.name())
				}
			}
		})
	}
}

// Where a command prints a report, --json prints it as one JSON value.
func TestEveryReportHasJSON(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "c.hcl")
	if err := os.WriteFile(cfg, []byte("agent \"a\" {\n  command = [\"x\"]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args     []string
		wantCode int
		key      string // a key of the object
	}{
		{[]string{"version", "--json"}, 0, "version"},
		{[]string{"config", "show", "--json", "--config", cfg}, 0, "would_serve"},
		{[]string{"config", "validate", "--json", "--config", cfg}, 0, "agents"},
		{[]string{"doctor", "--json", "--url", "ws://127.0.0.1:1/"}, 1, "steps"},
		{[]string{"dialects", "--json"}, 0, ""},
		{[]string{"check", "--json", "--url", "ws://127.0.0.1:1/"}, 1, "results"},
	} {
		t.Run(strings.Join(tt.args[:2], " "), func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runSelf(t, nil, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			var v any
			if err := json.Unmarshal([]byte(stdout), &v); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			if obj, ok := v.(map[string]any); tt.key != "" && (!ok || obj[tt.key] == nil) {
				t.Errorf("stdout lacks %q:\n%s", tt.key, stdout)
			}
		})
	}
}

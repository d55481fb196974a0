package cli

import (
	"slices"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		`agent --acp`:                   {"agent", "--acp"},
		`  a  'b c'  "d \"e\" $x" f\ g`: {"a", "b c", `d "e" $x`, "f g"},
		`a ''`:                          {"a", ""},
		`"/path with space/agent" -v`:   {"/path with space/agent", "-v"},
	} {
		got, err := splitCommand(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`a 'b`, `a "b`} {
		if _, err := splitCommand(bad); err == nil {
			t.Errorf("splitCommand(%q): no error", bad)
		}
	}
}

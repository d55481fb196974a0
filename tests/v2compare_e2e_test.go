package tests

// `acp-bridge compare` across protocol versions, end to end: one agent as
// v1 and as v2 (through the bridge) has no difference once both sides are
// reduced to their turns' outcomes, and two v2 agents that differ in one
// seeded way differ in exactly that.

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCompareV2_SameAgentAsV1AndV2(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	env := []string{"FAKE_AGENT=flawed"}
	prompts := []string{"--prompt", "hello", "--prompt", "Ask for permission, then go on", "--prompt", "!cancel wait-cancel"}
	asV2 := BridgeBin + " --no-sessions --editor-protocol 2 -- " + exe
	out, code := runCompare(t, env, append([]string{"--json", "--exit-code", "--text", "--a", exe, "--b", asV2, "--b-protocol", "2"}, prompts...)...)
	var c compareJSON
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("--json does not parse: %v\n%s", err, out)
	}
	if code != 0 || len(c.Differences) != 0 {
		t.Fatalf("the flawed agent as v1 and as v2: exit %d, want no difference\n%s", code, out)
	}
	if len(c.A.Turns) != 3 || len(c.B.Turns) != 3 || c.B.Turns[0].StopReason != "end_turn" || c.B.Turns[2].StopReason != "cancelled" {
		t.Fatalf("want three turns on each side, the v2 side ending end_turn … cancelled\n%s", out)
	}
	if !strings.HasPrefix(strings.Join(c.B.Turns[0].Events, "\n"), `message "`) {
		t.Fatalf("the v2 side's first turn has no message text: %q", c.B.Turns[0].Events)
	}
	var perm bool
	for _, ev := range c.B.Turns[1].Events {
		perm = perm || strings.HasPrefix(ev, "permission ")
	}
	if !perm {
		t.Fatalf("the permission turn shows no permission request on the v2 side: %q", c.B.Turns[1].Events)
	}
}

func TestCompareV2_SeededDifference(t *testing.T) {
	t.Parallel()
	agent := strings.Join(NodeScript(t, sdkAgentV2Script), " ")
	prompts := []string{"--prompt", "hello there", "--prompt", "tool", "--prompt", "extras"}
	args := []string{"--json", "--exit-code", "--text", "--a-protocol", "2", "--b-protocol", "2", "--a", agent}

	out, code := runCompare(t, nil, append(append(args, "--b", agent), prompts...)...)
	var same compareJSON
	if err := json.Unmarshal([]byte(out), &same); err != nil {
		t.Fatalf("--json does not parse: %v\n%s", err, out)
	}
	if code != 0 || len(same.Differences) != 0 || len(same.B.Turns) != 3 {
		t.Fatalf("the SDK v2 agent against itself: exit %d, want no difference\n%s", code, out)
	}

	seeded := "env SDK_AGENT_V2_DEFECTS=short-message " + agent
	out, code = runCompare(t, nil, append(append(args, "--b", seeded), prompts...)...)
	var c compareJSON
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("--json does not parse: %v\n%s", err, out)
	}
	// The final whole-message upsert drops a word: the reply the user is
	// left with differs, though every chunk streamed the same.
	want := []struct{ A, B string }{{`#1 message "heard: hello there"`, "-"}, {"-", `#1 message "heard: hello"`}}
	if code != 1 || len(c.Differences) != len(want) {
		t.Fatalf("short-message: exit %d, want 1 and the first turn's message text differing\n%s", code, out)
	}
	for i, d := range c.Differences {
		if !strings.HasPrefix(d.Area, `turn 1 "hello there"`) || d.A != want[i].A || d.B != want[i].B {
			t.Errorf("difference %d: %+v, want %+v in turn 1", i, d, want[i])
		}
	}
}

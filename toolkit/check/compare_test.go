package check

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent/flawed"
)

func compareFlawed(t *testing.T, a, b flawed.Set, prompts ...string) *Comparison {
	t.Helper()
	c, err := Compare(context.Background(), CompareOptions{
		A: flawedDialer(a), B: flawedDialer(b), Prompts: prompts,
		Timeout: 5 * time.Second, Quiet: 100 * time.Millisecond, CancelAfter: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompare_IdenticalAgentsDoNotDiffer(t *testing.T) {
	c := compareFlawed(t, nil, nil, "hello", DefaultFilePrompt, DefaultPermissionPrompt, CancelPrefix+"wait-cancel")
	if len(c.Differences) != 0 {
		t.Fatalf("identical agents differ:\n%s", dump(c))
	}
	// The recordings are real: the permission turn holds the tool call's
	// lifecycle and the permission request, renumbered.
	evs := strings.Join(c.A.Turns[2].Events, "\n")
	for _, want := range []string{"tool_call tc1 kind=edit status=pending", "request session/request_permission tc1 options=allow_once,reject_once", "tool_call_update tc1 status=completed"} {
		if !strings.Contains(evs, want) {
			t.Errorf("permission turn lacks %q:\n%s", want, evs)
		}
	}
	if got := c.A.Turns[0].Events; len(got) != 1 || got[0] != `agent_message_chunk "Hello, world."` {
		t.Errorf("hello turn events %q, want the three chunks merged", got)
	}
	if c.A.Turns[3].StopReason != "cancelled" || c.A.Turns[0].End <= 0 || c.A.Turns[0].FirstUpdate <= 0 {
		t.Errorf("turns %+v", c.A.Turns)
	}
}

func TestCompare_OneKnownDifference(t *testing.T) {
	for _, tc := range []struct {
		name    string
		b       flawed.Set
		prompts []string
		area, a string
		bWant   string
	}{
		{"late-updates", flawed.Set{flawed.LateUpdates: true}, []string{"hello"},
			`turn 1 "hello" updates`, "-", "#2 late agent_message_chunk"},
		{"canceled-spelling", flawed.Set{flawed.CanceledSpelling: true}, []string{"hello", CancelPrefix + "wait-cancel"},
			`turn 2 "!cancel wait-cancel" stopReason`, "cancelled", "canceled"},
		{"capabilities", flawed.Set{flawed.BadProtocolVersion: true}, []string{"hello"},
			"capabilities", "protocolVersion=1", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compareFlawed(t, nil, tc.b, tc.prompts...)
			want := Difference{tc.area, tc.a, tc.bWant}
			if tc.name == "capabilities" {
				// protocolVersion differs: one line per side.
				if len(c.Differences) != 2 || c.Differences[0].B != "protocolVersion=99" && c.Differences[1].B != "protocolVersion=99" {
					t.Fatalf("differences:\n%s", dump(c))
				}
				return
			}
			if len(c.Differences) != 1 || c.Differences[0] != want {
				t.Fatalf("differences %+v, want exactly %+v\n%s", c.Differences, want, dump(c))
			}
		})
	}
}

func TestCompare_JSONRoundTrip(t *testing.T) {
	o := CompareOptions{A: flawedDialer(nil), B: flawedDialer(flawed.Set{flawed.SchemaViolation: true}), Prompts: []string{"hello"},
		Timeout: 5 * time.Second, Quiet: 100 * time.Millisecond}
	c, err := Compare(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// schema-violation adds a chunk whose content is a string: the shape
	// differs (a second chunk event) whatever the text.
	if len(c.Differences) != 1 {
		t.Fatalf("differences:\n%s", dump(c))
	}
	var b bytes.Buffer
	if err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Comparison
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Differences) != 1 {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
}

// TestCompare_CapabilitiesFlatten: an empty object is a capability (it
// must not vanish), and false or null read as absent, as the spec reads
// them.
func TestCompare_CapabilitiesFlatten(t *testing.T) {
	caps := func(js string) []string {
		var out []string
		flatten("agentCapabilities", gjson.Parse(js), &out)
		return out
	}
	for _, tc := range []struct {
		a, b   string
		differ bool
	}{
		{`{"sessionCapabilities":{"close":{}}}`, `{"sessionCapabilities":{}}`, true},
		{`{"sessionCapabilities":{"close":{}}}`, `{}`, true},
		{`{"sessionCapabilities":{"close":{},"list":{}}}`, `{"sessionCapabilities":{"list":{}}}`, true},
		{`{"loadSession":false}`, `{}`, false},
		{`{"loadSession":null,"promptCapabilities":{"image":false}}`, `{"promptCapabilities":{}}`, true}, // an empty object is a marker; one of only false is not
		{`{"loadSession":true}`, `{}`, true},
		{`{"mcpCapabilities":{"http":false,"sse":false}}`, `{}`, false},
	} {
		a, b := &Recording{Capabilities: caps(tc.a)}, &Recording{Capabilities: caps(tc.b)}
		ds := diff(a, b, CompareOptions{})
		if (len(ds) > 0) != tc.differ {
			t.Errorf("%s vs %s: differences %+v (flattened %q, %q), want differ=%v", tc.a, tc.b, ds, a.Capabilities, b.Capabilities, tc.differ)
		}
	}
}

// TestCompare_SetupUpdatesCompared: updates an agent sends before the
// session/new answer are part of the comparison.
func TestCompare_SetupUpdatesCompared(t *testing.T) {
	c := compareFlawed(t, nil, flawed.Set{flawed.EarlyUpdates: true}, "hello")
	want := Difference{"session setup", "-", "#1 early available_commands_update"}
	if len(c.Differences) != 1 || c.Differences[0] != want {
		t.Fatalf("differences %+v, want exactly %+v\n%s", c.Differences, want, dump(c))
	}
}

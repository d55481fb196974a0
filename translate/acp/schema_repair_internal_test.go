package acp

import (
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// Every update the editor gets validates against the ACP v1 schema: a
// member that is null where the schema wants a value is left out, an
// update whose required member was null is dropped, and both are counted
// as schema repairs; a valid update passes byte for byte.
func TestShimSchema_NullMembersRepairedOrDropped(t *testing.T) {
	for _, c := range []struct {
		name, update string
		want         string // "" dropped, else a gjson path that must be absent in what passes
		note         string
	}{
		{"required null: dropped", `{"sessionUpdate":"usage_update","used":null,"size":100}`, "", "dropped"},
		{"optional null: left out", `{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Read","kind":null}`, "params.update.kind", "left out update.kind"},
		{"nullable null: unchanged", `{"sessionUpdate":"usage_update","used":5,"size":100,"cost":null}`, "params.update.nothing", ""},
		{"valid: unchanged", `{"sessionUpdate":"usage_update","used":5,"size":100}`, "params.update.nothing", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewShim(ShimOptions{})
			frame := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + c.update + `}}`
			outs, err := s.FromAgent([]byte(frame))
			if err != nil {
				t.Fatal(err)
			}
			var passed []byte
			var notes []string
			for _, o := range outs {
				switch o.Kind {
				case translate.Forward, translate.Notify:
					passed = o.Body
				case translate.Note:
					notes = append(notes, o.Method+": "+string(o.Body))
				}
			}
			switch {
			case c.want == "" && passed != nil:
				t.Fatalf("passed %s, want it dropped", passed)
			case c.want != "" && passed == nil:
				t.Fatalf("dropped (notes %q), want it passed", notes)
			case c.want != "" && gjson.GetBytes(passed, c.want).Exists():
				t.Fatalf("passed %s with %s still there", passed, c.want)
			}
			if c.note == "" {
				if len(notes) > 0 || string(passed) != frame {
					t.Fatalf("a valid update was changed: %s, notes %q", passed, notes)
				}
				return
			}
			if len(notes) != 1 || !strings.HasPrefix(notes[0], string(RuleSchema)+": ") || !strings.Contains(notes[0], c.note) {
				t.Fatalf("notes %q, want one schema note saying %q", notes, c.note)
			}
		})
	}
}

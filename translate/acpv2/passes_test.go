package acpv2

import (
	"math/rand/v2"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

// TestNegotiatorPassesUpdatesPromise checks the Negotiator's
// translate.UpdatePasser promise as translatetest.CheckPasses does the
// shim's (translate/acp's TestPassesUpdatesPromise): seeded random
// histories in which the agent answers initialize as v1 (1, "1", a
// v1-shaped 2), as v2, with an error (asked again for 1) or not at all yet,
// links go down and negotiate again; for every session whose
// PassesUpdates is true at a step, a twin replayed from the history gets a
// random plain chunk, which must come back as one Forward of its bytes,
// and must then answer the history's next inputs as the Negotiator does.
// The v1 translator behind it is the relay or the shim; versions forced
// by --agent-protocol and an editor speaking v2 are cases of their own.
func TestNegotiatorPassesUpdatesPromise(t *testing.T) {
	relay := func() translate.Translator { return acp.New() }
	shim := func() translate.Translator { return acp.NewShim(acp.ShimOptions{}) }
	for _, c := range []struct {
		name   string
		force  int
		editor int
		v1     func() translate.Translator
		v2     bool // the agent may answer as v2
		seeds  uint64
		passes bool // the v1 translator may be asked: some pairs must be checked
	}{
		{"v1 agent, relay", 0, 1, relay, false, 8, true},
		{"v1 agent, shim", 0, 1, shim, false, 8, true},
		{"v1 or v2 agent, relay", 0, 1, relay, true, 8, true},
		{"v1 or v2 agent, shim", 0, 1, shim, true, 8, true},
		{"forced 1, shim", 1, 1, shim, true, 4, true},
		{"forced 1, relay", 1, 1, relay, true, 4, true},
		{"forced 2", 2, 1, shim, true, 4, false},
		{"editor 2, v1 or v2 agent", 0, 2, shim, true, 6, true},
		{"editor 2, forced 2", 2, 2, shim, true, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			newTr := func() translate.Translator {
				n := NewNegotiator(c.force, c.v1)
				if c.editor != 1 {
					n.SetEditorProtocol(c.editor)
				}
				return n
			}
			var sum translatetest.PassesStats
			for seed := range c.seeds {
				st, err := translatetest.CheckPasses(rand.New(rand.NewPCG(seed, 51)),
					translatetest.PassesConfig{New: newTr, Steps: 40, Window: 6, V2: c.v2})
				sum.Add(st)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			if c.passes && sum.Checked == 0 {
				t.Fatalf("no state in which PassesUpdates was true: nothing checked")
			}
			t.Logf("%d seeds: %s", c.seeds, translatetest.FormatStats(sum))
		})
	}
}

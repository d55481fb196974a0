package acp_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

// passesCase is one translator the UpdatePasser promise is checked for.
type passesCase struct {
	name  string
	new   func() translate.Translator
	seeds uint64 // histories checked
}

// passesCases are the shim with its option sets (the defaults, every rule
// off in turn, forwarding late updates, dropping invalid ones, no quiet
// period) and the bare relay.
func passesCases() []passesCase {
	shim := func(opt acp.ShimOptions) func() translate.Translator {
		return func() translate.Translator { return acp.NewShim(opt) }
	}
	cs := []passesCase{
		{"shim defaults", shim(acp.ShimOptions{}), 16},
		{"shim forward late", shim(acp.ShimOptions{ForwardLate: true}), 8},
		{"shim drop invalid", shim(acp.ShimOptions{DropInvalid: true}), 8},
		{"shim no quiet period", shim(acp.ShimOptions{Quiet: -1}), 8},
		{"shim quiet 50ms", shim(acp.ShimOptions{Quiet: 50 * time.Millisecond}), 4},
		{"relay", func() translate.Translator { return acp.New() }, 8},
	}
	// Every rule off in turn: fewer histories each, the same seeds.
	for _, r := range acp.Rules {
		cs = append(cs, passesCase{"shim without " + string(r), shim(acp.ShimOptions{Off: map[acp.Rule]bool{r: true}}), 3})
	}
	return cs
}

// TestPassesUpdatesPromise checks translate.UpdatePasser as a class: seeded
// random histories of editor messages (initialize, session/new, load,
// resume, fork, prompts, cancels, set_mode, extension methods, answers to
// the agent's calls, CancelRequest, Abandon, LinkUp, LinkDown, quiet-period
// ticks) and agent frames (answers, right and wrong, to what was sent;
// updates of every kind and shape, plain chunks of open, answered, held,
// loading and unknown sessions, malformed frames; requests to the editor;
// $/cancel_request) drive each translator. At every step, for every session
// id whose PassesUpdates is true, a twin replayed from the history gets one
// random plain chunk of it, which must come back as exactly one Forward of
// its bytes; the twin and the translator then get the history's next
// inputs and must answer them alike (see translatetest.CheckPasses).
func TestPassesUpdatesPromise(t *testing.T) {
	var all translatetest.PassesStats
	for _, c := range passesCases() {
		t.Run(c.name, func(t *testing.T) {
			var sum translatetest.PassesStats
			for seed := range c.seeds {
				st, err := translatetest.CheckPasses(rand.New(rand.NewPCG(seed, 51)),
					translatetest.PassesConfig{New: c.new, Steps: 40, Window: 6})
				sum.Add(st)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
			if sum.Checked == 0 {
				t.Fatalf("no state in which PassesUpdates was true: nothing checked")
			}
			t.Logf("%d seeds: %s", c.seeds, translatetest.FormatStats(sum))
			all.Add(sum)
		})
	}
	if !t.Failed() {
		t.Logf("all: %s", translatetest.FormatStats(all))
	}
}

// FuzzShimPassesUpdates drives the same check from fuzz bytes: the first
// byte picks the translator (one of passesCases), every later byte one
// choice of the history.
func FuzzShimPassesUpdates(f *testing.F) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		b := make([]byte, 100+r.IntN(200))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		f.Add(b)
	}
	cases := passesCases()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		c := cases[int(data[0])%len(cases)]
		_, err := translatetest.CheckPasses(translatetest.NewByteChooser(data[1:]),
			translatetest.PassesConfig{New: c.new, Steps: 100, Window: 6})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	})
}

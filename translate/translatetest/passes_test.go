package translatetest

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// liar is the ACP relay with a PassesUpdates that breaks its promise one
// of two ways: drop makes it drop the chunks of session "s2" it says pass;
// remember makes it count the chunks it is fed and put the count in the
// next answer it relays, which the chunk's own output does not show.
type liar struct {
	*acp.Relay
	drop, remember bool
	seen           int
}

func (l *liar) FromAgentEnvelope(f []byte, env *translate.Envelope, perr *translate.Error) ([]translate.Out, error) {
	if translate.PlainChunk(env) {
		l.seen++
		if l.drop && env.SessionID == "s2" {
			return nil, nil
		}
	}
	outs, err := l.Relay.FromAgentEnvelope(f, env, perr)
	if l.remember && l.seen > 0 && len(outs) == 1 && outs[0].Kind == translate.Reply {
		outs[0].Body = json.RawMessage(`{"chunks":` + strings.Repeat("1", l.seen) + `}`)
		l.seen = 0
	}
	return outs, err
}

// CheckPasses finds a translator whose PassesUpdates lies, whether the
// chunk's own output shows it or only what it does later.
func TestCheckPasses_FindsLies(t *testing.T) {
	for _, c := range []struct {
		name, want string
		l          func() translate.Translator
	}{
		{"chunk dropped", "returned 0 outputs", func() translate.Translator { return &liar{Relay: acp.New(), drop: true} }},
		{"state changed", "differs on input", func() translate.Translator { return &liar{Relay: acp.New(), remember: true} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			for seed := uint64(0); seed < 8 && err == nil; seed++ {
				_, err = CheckPasses(rand.New(rand.NewPCG(seed, 51)), PassesConfig{New: c.l, Steps: 40, Window: 6})
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckPasses returned %v, want an error saying %q", err, c.want)
			}
		})
	}
	// The relay itself keeps its promise.
	for seed := range uint64(4) {
		st, err := CheckPasses(NewByteChooser([]byte{byte(seed), 7, 200, 13, 99, 42, 5, 180, 33, 66}), PassesConfig{New: func() translate.Translator { return acp.New() }, Steps: 40, Window: 6})
		if err != nil {
			t.Fatal(err)
		}
		if st.Checked == 0 {
			t.Fatalf("byte chooser %d: nothing checked", seed)
		}
	}
}

// What doctor hears on the agent hop, for its diagnosis: heard, the tap
// the engine calls with each agent frame and dialect note, and the lines
// of a child's stdout that are not JSON.

package cli

import (
	"slices"
	"strings"
	"sync"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/tidwall/gjson"
)

// heard is what crossed the agent hop, for the diagnosis: the frames the
// agent sent (the first few kept), the lines on its stdout that were not
// JSON, the notes of the dialect (unmatched frames, the connect frame it
// waits for), and how many frames went to the agent.
type heard struct {
	mu sync.Mutex
	d  heardSoFar
}

// heardSoFar is a copy of what heard holds.
type heardSoFar struct {
	sent      int
	received  int
	frames    []string // the first maxKept, as snippets
	jsonRPC   string   // the first frame in a JSON-RPC 2.0 envelope
	noiseN    int
	noise     []string
	unmatchN  int
	unmatched []string // the first maxKept notes, without their near miss
	nearMiss  string   // the first near miss an unmatched note named
	expect    string   // the connect-expect note's detail
	rejected  string   // the connect-rejected note's detail
}

const maxKept = 3

func (h *heard) tap(ev bridge.TapEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ev.Hop == bridge.AgentHop && ev.Inbound:
		if h.d.received++; len(h.d.frames) < maxKept {
			h.d.frames = append(h.d.frames, snippet(ev.Message, 160))
		}
		if h.d.jsonRPC == "" && gjson.GetBytes(ev.Message, "jsonrpc").Str == "2.0" {
			h.d.jsonRPC = snippet(ev.Message, 160)
		}
	case ev.Hop == bridge.AgentHop:
		h.d.sent++
	case ev.Hop == bridge.BridgeHop && ev.Note == "connect-expect":
		h.d.expect = ev.Detail
	case ev.Hop == bridge.BridgeHop && ev.Note == "connect-rejected":
		h.d.rejected = ev.Detail
	case ev.Hop == bridge.BridgeHop && ev.Note == "unmatched-frames":
		note, near, _ := strings.Cut(ev.Detail, rules.NearMissMark)
		if h.d.nearMiss == "" {
			h.d.nearMiss = near
		}
		if h.d.unmatchN++; len(h.d.unmatched) < maxKept {
			h.d.unmatched = append(h.d.unmatched, snippet([]byte(note), 200))
		}
	}
}

func (h *heard) noiseLine(line []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.d.noiseN++; len(h.d.noise) < maxKept {
		h.d.noise = append(h.d.noise, snippet(line, 120))
	}
}

func (h *heard) counts() (frames, noise, unmatched int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.d.received, h.d.noiseN, h.d.unmatchN
}

func (h *heard) snapshot() heardSoFar {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.d
	c.frames, c.noise, c.unmatched = slices.Clone(c.frames), slices.Clone(c.noise), slices.Clone(c.unmatched)
	return c
}

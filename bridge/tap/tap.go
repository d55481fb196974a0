// Package tap defines what the bridge's engine reports to a tap: one Event
// for each message that crosses a hop, and one for each decision the engine
// takes on its own (a repair, a cancellation's grace period).
//
// The package imports nothing from the module, so that the tools which
// consume events (the trace writer, the conformance checker) need not
// import the engine to name them.
package tap

// Hop says which side of the bridge a tapped message crossed.
type Hop int

const (
	// EditorHop is the ACP stream on stdio.
	EditorHop Hop = iota + 1
	// AgentHop is one agent link, in its dialect's own format.
	AgentHop
	// BridgeHop is the engine itself: Note events.
	BridgeHop
)

func (h Hop) String() string {
	switch h {
	case EditorHop:
		return "editor"
	case AgentHop:
		return "agent"
	case BridgeHop:
		return "bridge"
	}
	return "?"
}

// Event is one message seen by a tap.
type Event struct {
	Hop Hop
	// Inbound is true for a message the bridge received (from the editor
	// or from an agent), false for one it sent.
	Inbound bool
	// Link identifies the agent link (AgentHop), counting from 1; 0 on the
	// editor hop.
	Link int
	// Session is the ACP session the message belongs to, when the engine
	// knows it without parsing (often empty on the agent hop). Like
	// Message it may share a frame's memory: clone it to keep it.
	Session string
	// Message is the whole message as it crossed the hop (borrowed: valid
	// only during the call). Empty for notes.
	Message []byte
	// Note names the engine's decision for BridgeHop events: a repair
	// (bridge.Repair) or another event such as "cancel-grace".
	Note string
	// Detail says more about a note, for a person.
	Detail string
	// Rule names the rule of the link's translator that handled an
	// inbound agent message (translate.RuleReporter): a rule profile's
	// event, "reply session/prompt"; empty when none did or the dialect
	// has no rules.
	Rule string
}

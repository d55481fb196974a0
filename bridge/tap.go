package bridge

import "github.com/acp-bridge/acp-bridge/bridge/tap"

// Hop and TapEvent are declared in package tap, a leaf, so that the tools
// consuming a Bridge's taps need not import the engine; these names keep
// the engine's own spelling.
type (
	// Hop says which side of the bridge a tapped message crossed.
	Hop = tap.Hop
	// TapEvent is one message seen by Bridge.Tap.
	TapEvent = tap.Event
)

// The hops, as in package tap.
const (
	EditorHop = tap.EditorHop
	AgentHop  = tap.AgentHop
	BridgeHop = tap.BridgeHop
)

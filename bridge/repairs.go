package bridge

import (
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/acp-bridge/acp-bridge/translate"
)

// A Repair names something the bridge changed or dropped so that the editor
// sees a correct ACP stream. Every repair is counted, logged at debug level,
// shown to Bridge.Tap as a note, and summarised in the log at exit; the
// compliance shim lists and switches them by these names.
type Repair string

const (
	// RepairMultiLineFrames: an agent frame that spanned several lines (a
	// pretty-printed WebSocket message) was compacted onto one.
	RepairMultiLineFrames Repair = "multi-line-frames"
	// RepairObjectResults: a null result of an ACP method whose result is
	// an object became {} (ACP's empty results are {}; older peers send
	// null).
	RepairObjectResults Repair = "object-results"
	// RepairDrainedTurnUpdates: a session/update for a turn the bridge had
	// already ended after the cancel grace period was dropped.
	RepairDrainedTurnUpdates Repair = "drained-turn-updates"
	// RepairDrainedTurnPermissions: a permission request for such a turn
	// was answered "cancelled" instead of reaching the editor.
	RepairDrainedTurnPermissions Repair = "drained-turn-permissions"
	// RepairUnroutableUpdates: a session/update without sessionId or
	// sessionUpdate was dropped (strict editors reject the whole message).
	// The acp relay reports it.
	RepairUnroutableUpdates Repair = "unroutable-updates"
)

// repairCounts counts repairs by name; loop-owned.
type repairCounts map[Repair]int

// repaired counts and reports one repair.
func (e *engine) repaired(r Repair, session, detail string) {
	if e.repairs == nil {
		e.repairs = repairCounts{}
	}
	e.repairs[r]++
	e.log.Debug("repaired", "repair", string(r), "session", session, "detail", detail, "count", e.repairs[r])
	e.tap(TapEvent{Hop: BridgeHop, Session: session, Note: string(r), Detail: detail})
}

// logSummary logs how often each repair was applied, if any was.
func (rc repairCounts) logSummary(log hclog.Logger) {
	if len(rc) == 0 {
		return
	}
	names := make([]string, 0, len(rc))
	for r := range rc {
		names = append(names, string(r))
	}
	slices.Sort(names)
	args := make([]any, 0, 2*len(names))
	for _, n := range names {
		args = append(args, n, rc[Repair(n)])
	}
	log.Info("repairs applied to keep the editor's stream correct", args...)
}

// note handles a translator's Note. Most are repairs, counted and logged at
// debug; a refused cancel is logged at WARN as well, with the agent's words,
// because the agent may still be running a turn the editor saw end.
func (e *engine) note(l *link, o translate.Out) {
	switch o.Method {
	case noteCancelRefused:
		e.log.Warn("agent refused the cancel; the turn was answered cancelled and its later frames are dropped",
			"session", o.Session, "link", l.String(), "detail", string(o.Body))
	case noteCancelUnacked:
		e.log.Warn("agent did not acknowledge the stop; the turn was answered cancelled and its later frames are dropped",
			"session", o.Session, "link", l.String(), "detail", string(o.Body))
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteCancelIgnored:
		e.log.Warn("agent finished the turn instead of stopping it; the turn was answered cancelled",
			"session", o.Session, "link", l.String(), "detail", string(o.Body))
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteCancelAcked:
		e.log.Debug("agent acknowledged the stop", "session", o.Session, "link", l.String())
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteConnectRejected:
		e.log.Warn("agent refused the connection; every request on this link is answered with the refusal",
			"link", l.String(), "detail", string(o.Body))
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteInvalidStop:
		e.log.Warn("a profile's end_turn gave no stop reason; the turn ended end_turn",
			"session", o.Session, "link", l.String(), "detail", string(o.Body))
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteConnectExpect:
		// Not a repair: the profile's connect block waiting for the
		// agent's first frame, which it says so that "initialize timed
		// out" can be told as "this frame never came".
		e.log.Debug("waiting for the agent's connect frame", "link", l.String(), "detail", string(o.Body))
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteTurnQuiet:
		e.log.Warn("turn without a frame the profile matched", "session", o.Session, "link", l.String(), "detail", string(o.Body))
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	case noteUnmatched:
		// Not a repair: the profile, not the stream, is at fault (a typo
		// in a match hangs the turn). The first per link is shown at WARN
		// so that a person sees it when it happens, the rest counted.
		e.unmatched++
		l.unmatched++
		if l.unmatched == 1 {
			e.log.Warn("agent frame matched no rule of the profile; further ones on this link are counted",
				"session", o.Session, "link", l.String(), "detail", string(o.Body))
		}
		// The story log shows every one at debug, from the tap.
		e.tap(TapEvent{Hop: BridgeHop, Session: o.Session, Note: o.Method, Detail: string(o.Body)})
		return
	}
	e.repaired(Repair(o.Method), o.Session, string(o.Body))
}

// noteCancelRefused is the Note a translator sends when the agent answers a
// forwarded cancel with an error.
const noteCancelRefused = "cancel-refused"

// noteConnectRejected is the Note a rule profile's translator sends when
// its connect block's reject matched: the agent refused the connection
// (most often its credentials). Not a repair either.
const noteConnectRejected = "connect-rejected"

// noteTurnQuiet is the Note a translator sends when no frame of a turn
// matched a rule for a while; it is not a repair either.
const noteTurnQuiet = "turn-quiet"

// noteCancelUnacked is the Note a translator sends when a forwarded stop
// was not acknowledged in time; noteCancelAcked when it was. Neither is a
// repair.
const (
	noteCancelUnacked = "cancel-unacknowledged"
	noteCancelAcked   = "cancel-acknowledged"
	// noteCancelIgnored: a stopped turn ended as the agent finished it.
	noteCancelIgnored = "cancel-ignored"
)

// noteInvalidStop is the Note a translator sends when a profile's end_turn
// expression gave a value that is no stop reason (the turn ended
// end_turn); noteConnectExpect when a profile's connect block starts
// waiting for the agent's first frame. Neither is a repair.
const (
	noteInvalidStop   = "invalid-stop-reason"
	noteConnectExpect = "connect-expect"
)

// noteUnmatched is the Note a translator sends for an agent frame it has no
// rule for.
const noteUnmatched = "unmatched-frames"

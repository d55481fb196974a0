package translate

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Calls is the table of a translator's outstanding Calls to the editor:
// those it made and has neither seen answered nor withdrawn. Each holds the
// dialect's record T of what the call is for, typically the agent's request
// it answers and what the editor was offered. The zero value is an empty
// table whose first call gets Ref 1; a dialect sets Dialect, to be named in
// the errors it returns.
//
// A dialect uses it the same way whatever its agent's wire format:
//
//   - When the agent asks something of the editor (a permission, a file),
//     Call records the agent's request id (a JSON-RPC id, Claude Code's
//     control request_id, the Codex app-server's id of an approval request)
//     and returns the Call for the editor.
//   - When the editor answers, Take hands back that record, from which the
//     dialect answers the agent's request: a Codex approval gets its
//     decision, sent as the result for the app-server's id.
//   - When the turn is cancelled or ends, Withdraw sends the editor a
//     $/cancel_request for each call that is still waiting, and the agent
//     the refusal it is owed, so that neither peer waits on the other. The
//     match function picks the calls: those of one session (a Codex thread),
//     those of one kind, or the one whose agent request the agent itself
//     gave up on.
//
// An answer to a withdrawn call, which the editor may have sent before it
// read the $/cancel_request, is dropped quietly once; any other answer to a
// Ref that is not outstanding is a bug of the editor or the engine, and Take
// says so.
type Calls[T any] struct {
	// Dialect prefixes Take's errors, as a dialect prefixes its own:
	// "acp-v0: editor answered call 3, which is not outstanding".
	Dialect string

	last      Ref
	pending   map[Ref]pendingCall[T]
	withdrawn map[Ref]bool
}

type pendingCall[T any] struct {
	session string
	record  T
}

// Call records a new call to the editor, made for record, and returns it: an
// Out of kind Call with the next Ref, method, params as its Body and session
// as its Session ("" when the dialect does not name the session). A later
// CancelCall for it carries the same session.
func (c *Calls[T]) Call(session, method string, params json.RawMessage, record T) Out {
	if c.pending == nil {
		c.pending = make(map[Ref]pendingCall[T])
	}
	c.last++
	c.pending[c.last] = pendingCall[T]{session, record}
	return Out{Kind: Call, Ref: c.last, Method: method, Session: session, Body: params}
}

// Take removes the call the editor answered with a Response for ref and
// returns its record, with ok true. When ok is false the dialect returns
// err as it is: it is nil for a call that was withdrawn, whose answer
// crossed the $/cancel_request and is dropped, and otherwise says that the
// call is not outstanding.
func (c *Calls[T]) Take(ref Ref) (record T, ok bool, err error) {
	if p, found := c.pending[ref]; found {
		delete(c.pending, ref)
		return p.record, true, nil
	}
	if c.withdrawn[ref] {
		delete(c.withdrawn, ref)
		return record, false, nil
	}
	err = fmt.Errorf("editor answered call %d, which is not outstanding", ref)
	if c.Dialect != "" {
		err = fmt.Errorf("%s: %w", c.Dialect, err)
	}
	return record, false, err
}

// Withdraw withdraws every outstanding call whose record match reports true
// (every call, when match is nil), in Ref order, so that the outputs do not
// depend on map order. For each it returns a CancelCall for the editor
// followed by what answer returns for the agent: the refusal the agent's
// request is owed, and whatever else the dialect closes with it. answer may
// be nil, when the agent no longer waits (it withdrew the request itself).
// The editor's late answers to these calls are dropped by Take.
func (c *Calls[T]) Withdraw(match func(T) bool, answer func(T) []Out) []Out {
	var refs []Ref
	for ref, p := range c.pending {
		if match == nil || match(p.record) {
			refs = append(refs, ref)
		}
	}
	slices.Sort(refs)
	var outs []Out
	for _, ref := range refs {
		p := c.pending[ref]
		delete(c.pending, ref)
		if c.withdrawn == nil {
			c.withdrawn = make(map[Ref]bool)
		}
		c.withdrawn[ref] = true
		outs = append(outs, Out{Kind: CancelCall, Ref: ref, Session: p.session})
		if answer != nil {
			outs = append(outs, answer(p.record)...)
		}
	}
	return outs
}

// Clear forgets every outstanding call without withdrawing it, for when
// neither peer waits any longer: the link to the agent is gone and the
// engine has withdrawn the calls from the editor itself. Refs are not
// reused.
func (c *Calls[T]) Clear() {
	clear(c.pending)
}

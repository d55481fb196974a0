// Doctor's prompt turn: its editor's answer to a permission request,
// what it counts of the turn's updates (turnWatch), and the turn's
// verdict (promptTurn).

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/tidwall/gjson"
)

// refusePermission answers a permission request as a careful user does:
// with the option that rejects once (else rejects always), so that the
// agent runs nothing for doctor and its turn goes on to its end; without a
// rejecting option, cancelled.
func refusePermission(params json.RawMessage) map[string]any {
	var always string
	for _, o := range gjson.GetBytes(params, "options").Array() {
		switch o.Get("kind").Str {
		case "reject_once":
			return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.Get("optionId").Str}}
		case "reject_always":
			if always == "" {
				always = o.Get("optionId").Str
			}
		}
	}
	if always != "" {
		return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": always}}
	}
	return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
}

// turnWatch counts the session/update notifications of doctor's turn, when
// the first came, and those with content an editor shows (a message, a
// thought, a tool call, a plan), by kind.
type turnWatch struct {
	mu      sync.Mutex
	updates int
	first   time.Time
	shown   int
	kinds   []string // every kind seen, in order of first sight
	asks    int      // permission requests, each refused
}

func (t *turnWatch) asked() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.asks++
}

func (t *turnWatch) update(params json.RawMessage) {
	u := gjson.GetBytes(params, "update")
	kind := u.Get("sessionUpdate").Str
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.updates++; t.updates == 1 {
		t.first = time.Now()
	}
	if !slices.Contains(t.kinds, kind) {
		t.kinds = append(t.kinds, kind)
	}
	if shows(kind, u) {
		t.shown++
	}
}

// shows reports whether an update of kind is content an editor shows the
// user as the agent's answer: a message or thought chunk that is not
// empty, a tool call, a plan. Commands, modes, usage, session information
// and the echo of the user's own prompt are not.
func shows(kind string, u gjson.Result) bool {
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk":
		c := u.Get("content")
		return c.Get("type").Str != "text" || c.Get("text").Str != ""
	case "tool_call", "tool_call_update", "plan":
		return true
	}
	return false
}

func (t *turnWatch) get() (updates int, first time.Time, shown, asks int, kinds []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.updates, t.first, t.shown, t.asks, slices.Clone(t.kinds)
}

// promptTurn runs one whole turn and reports its end, the time to the
// first update, and the agent frames the dialect could not place. The turn
// passes only when it ended, showed content an editor would show, and no
// agent frame went unmatched: then doctor may say "all good".
func (d *doctor) promptTurn(ctx context.Context, conn *acpclient.Conn, turn *turnWatch, sid, prompt string, spec launch.Agent, dial dialFunc) bool {
	start := time.Now()
	stop := d.waiting("the end of the prompt turn")
	pctx, cancel := context.WithTimeout(ctx, d.timeout)
	res, err := conn.Call(pctx, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": prompt}}})
	cancel()
	stop()
	took := time.Since(start).Round(time.Millisecond)
	updates, first, shown, asks, kinds := turn.get()
	h := d.heard.snapshot()
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return d.failed(ctx, "session/prompt", err, spec, dial)
		}
		err = fmt.Errorf("no end of turn within %v (%d update(s) so far)", d.timeout, updates)
		if updates == 0 || h.unmatchN > 0 {
			return d.failed(ctx, "session/prompt", err, spec, dial)
		}
		// The agent streamed, in words the dialect understood: the
		// dialect is right, the end never came (or not yet).
		why := "the dialect did not recognise the end of its turn: check the match of the rule that ends it (--log-level debug shows every frame)"
		if acpFamily(spec.Dialect) {
			why = "it never answered session/prompt, which an ACP agent must do with a stopReason: that is for the agent to fix"
		}
		return d.fail(fmt.Sprintf("session/prompt: %v; %s", err, d.heardText(h)),
			fmt.Sprintf("the agent streamed but did not end the turn: if it is still working, give it longer (--%s); if not, %s", launch.FlagRequestTimeout, why))
	}
	stopReason := gjson.GetBytes(res, "stopReason").Str
	if h.received == 0 {
		return d.wrongDialect(ctx, "session/prompt", fmt.Errorf("the turn ended (%s) after %v without a word from the agent", stopReason, took), spec, dial)
	}
	ended := fmt.Sprintf("the turn ended (%s) after %v with %d update(s)", stopReason, took, updates)
	if h.unmatchN > 0 {
		return d.unmatched(ctx, "session/prompt", ended, h, spec, dial)
	}
	if shown == 0 {
		what := ended
		if len(kinds) > 0 {
			what += " (" + strings.Join(kinds, ", ") + ")"
		}
		what += ", none of them content an editor shows (a message, a thought, a tool call, a plan); " + d.heardText(h)
		if fix, ok := d.fixJSONRPC(ctx, h, spec, dial); ok {
			return d.fail("session/prompt: "+what, fix)
		}
		return d.fail("session/prompt: "+what,
			fmt.Sprintf("no rule of dialect %s turned the agent's answer into a message: run doctor with --log-level debug to see which rule each frame matched, and give the one that carries the answer a message (or final_message); or use a prompt this agent answers in words", spec.Dialect))
	}
	d.pass("session/prompt: end of turn (%s) after %v; %d update(s), first update after %v; %d with content an editor shows", stopReason, took, updates, first.Sub(start).Round(time.Millisecond), shown)
	if asks > 0 {
		d.note("the agent asked permission %d time(s); doctor refused, so that it ran nothing", asks)
	}
	d.turnChecked = true
	return true
}

// Scenarios of a prompt turn: streaming, cancel (with and without a
// pending permission request), and a second prompt on a busy session.

package check

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

func scPromptStream(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.Prompt))
	if err != nil {
		return notRun("sending the prompt: %v", err)
	}
	m, err := r.response(id, r.opts.Timeout)
	if err != nil {
		return fail(nil, "%s", waitErr("session/prompt "+fmt.Sprintf("%q", r.opts.Prompt), err))
	}
	if m.Get("error").Exists() && m.Get("result").Exists() {
		return fail([]int{m.N}, "the prompt's answer carries both result and error")
	}
	if m.IsError() {
		return fail([]int{m.N}, "the prompt was answered with an error")
	}
	stop := m.Get("result.stopReason").Str
	if !stopReasons[stop] {
		return fail([]int{m.N}, "stopReason is %s, want one of end_turn, max_tokens, max_turn_requests, refusal, cancelled", m.Get("result.stopReason").Raw)
	}
	if d := editorDrops(m); d != "" {
		return fail([]int{m.N}, "an SDK-based editor never sees the prompt's answer: %s", d)
	}
	ups := r.updatesBetween(r.sid, 0, m.N)
	if len(ups) == 0 {
		return fail([]int{m.N}, "no session/update before the prompt's answer; the editor shows nothing for the turn")
	}
	if bad, why := r.dropped(ups); len(bad) > 0 {
		return fail(bad, "%d of the turn's %d session/update(s) are dropped by an editor built on the official SDK, so it shows %s: %s",
			len(bad), len(ups), map[bool]string{true: "nothing for the turn", false: "part of the turn"}[len(bad) == len(ups)], strings.Join(firstN(why, 3), " | "))
	}
	r.settle()
	if late := r.turnContentBetween(r.sid, m.N, -1); len(late) > 0 {
		return fail(append([]int{m.N}, late...), "%d session/update(s) of turn content after the prompt's answer; the editor has closed the turn", len(late))
	}
	return pass("%d update(s), then %s", len(ups), stop)
}

// startLong opens a session, sends the long prompt and waits for its
// first update (or CancelAfter). ok is false when the session could not
// be opened or the turn has already ended: v is the scenario's verdict.
func (r *run) startLong() (id string, v verdict, ok bool) {
	if v, ok := r.setup(); !ok {
		return "", v, false
	}
	id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.LongPrompt))
	if err != nil {
		return "", notRun("sending the prompt: %v", err), false
	}
	m, err := r.await(r.opts.CancelAfter, func(m Msg) bool {
		return isUpdate(m, r.sid) || (m.IsResponse() && m.id == id)
	})
	if err != nil && !errors.Is(err, errTimeout) {
		return "", notRun("%s", waitErr("the long prompt", err)), false
	}
	if err == nil && m.IsResponse() {
		return "", notRun("the turn for %q ended before it could be cancelled; give a prompt that keeps the agent busy (--long-prompt)", r.opts.LongPrompt), false
	}
	return id, verdict{}, true
}

func scCancel(r *run) verdict {
	id, v, ok := r.startLong()
	if !ok {
		return v
	}
	r.holdPermissions = true
	cn, err := r.notify("session/cancel", map[string]any{"sessionId": r.sid})
	if err != nil {
		return notRun("sending session/cancel: %v", err)
	}
	cancelN := cn.N
	m, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && m.id == id })
	if err != nil {
		return fail([]int{cancelN}, "%s", waitErr(fmt.Sprintf("no answer to the cancelled prompt within %s", r.opts.Timeout), err))
	}
	if m.IsError() {
		return fail([]int{cancelN, m.N}, "the cancelled prompt was answered with an error; it must be answered stopReason \"cancelled\"")
	}
	if stop := m.Get("result.stopReason"); stop.Str != "cancelled" {
		return fail([]int{cancelN, m.N}, "the cancelled prompt ended with stopReason %s, want \"cancelled\"", stop.Raw)
	}
	took := m.At - cn.At
	r.settle()
	// Session-level updates (available commands, mode) may come at any
	// time; only the cancelled turn's own content must stop.
	if late := r.turnContentBetween(r.sid, m.N, -1); len(late) > 0 {
		return fail(append([]int{m.N}, late...), "%d session/update(s) of turn content after the cancelled turn's answer", len(late))
	}
	return pass("cancelled %s after session/cancel", took.Round(time.Millisecond))
}

func scCancelPermission(r *run) verdict {
	if v, ok := r.setup(); !ok {
		return v
	}
	r.holdPermissions = true
	id, err := r.request("session/prompt", textPrompt(r.sid, r.opts.PermissionPrompt))
	if err != nil {
		return notRun("sending the prompt: %v", err)
	}
	m, err := r.await(r.opts.Timeout, func(m Msg) bool {
		return m.method == "session/request_permission" || (m.IsResponse() && m.id == id)
	})
	if err != nil {
		return notRun("%s", waitErr("waiting for a permission request", err))
	}
	if m.IsResponse() {
		return skip("the agent asked no permission for %q", r.opts.PermissionPrompt)
	}
	permN := m.N
	if _, err := r.notify("session/cancel", map[string]any{"sessionId": r.sid}); err != nil {
		return notRun("sending session/cancel: %v", err)
	}
	// Before the client answers the permission request, the turn must not
	// end: the agent has a request outstanding in it. A conformant agent
	// stays silent, so this costs the whole window; it is generous so that
	// a slow machine cannot hide an early answer.
	// Withdrawing the request with $/cancel_request first is the spec's
	// own cascade (ACP spec, $/cancel_request): the client answers it -32800 and
	// the turn may end.
	window := max(r.opts.Quiet, time.Second)
	withdrawn := -1
	if x, err := r.await(window, func(x Msg) bool {
		if !x.Out && x.method == "$/cancel_request" && x.Get("params.requestId").Raw == m.id && withdrawn < 0 {
			withdrawn = x.N
			r.held = slices.DeleteFunc(r.held, func(h Msg) bool { return h.id == m.id })
			r.reply(m.id, nil, -32800, "Request cancelled")
		}
		return x.IsResponse() && x.id == id
	}); err == nil {
		if withdrawn >= 0 {
			return pass("the agent withdrew its permission request with $/cancel_request before ending the turn")
		}
		return fail([]int{permN, x.N}, "the turn ended while its session/request_permission (id %s) was still unanswered; the agent should wait for the client's \"cancelled\" outcome, or withdraw the request with $/cancel_request first", m.id)
	}
	if _, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && m.id == id }); err != nil {
		return fail([]int{permN}, "%s", waitErr("no answer to the cancelled prompt after the permission request was answered \"cancelled\"", err))
	}
	return pass("the turn ended after the permission request was answered")
}

// scConcurrentPrompt sends a second prompt while the long one runs. ACP
// v1 leaves such a prompt undefined (one turn per session at a time), so
// an agent may refuse it or queue it: hold it until the first turn has
// ended, and answer it "cancelled" with that turn when the client cancels
// the session. It must not run it alongside the first turn, nor end the
// first turn for it: "cancelled" is the stop reason of a turn the client
// cancelled (session/cancel), and the client cancelled nothing.
//
// v1 updates do not say which prompt they belong to, so the second prompt
// is the file prompt: its work names hello.txt (a tool call, an
// fs/read_text_file), which the long prompt's does not. Seen before the
// first turn's answer, that work ran interleaved with the first turn; a
// second prompt whose work cannot be told apart leaves the verdict
// inconclusive (SKIP), never "queued".
func scConcurrentPrompt(r *run) verdict {
	idA, v, ok := r.startLong()
	if !ok {
		return v
	}
	b, err := r.request("session/prompt", textPrompt(r.sid, r.opts.FilePrompt))
	if err != nil {
		return notRun("sending the second prompt: %v", err)
	}
	bMsg := r.sent(b)
	cancelN := -1 // check's session/cancel, once sent
	defer func() {
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		r.drain(r.opts.Quiet)
	}()
	isAnswer := func(m Msg) bool { return m.IsResponse() && (m.id == idA || m.id == b) }
	// An agent that refuses the second prompt does so at once; give it a
	// moment, then end the first turn with session/cancel.
	m, err := r.await(max(r.opts.Quiet, time.Second), isAnswer)
	if errors.Is(err, errTimeout) {
		cn, cerr := r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		if cerr != nil {
			return notRun("sending session/cancel: %v", cerr)
		}
		cancelN = cn.N
		r.holdPermissions = true
		r.answerHeld()
		m, err = r.await(r.opts.Timeout, isAnswer)
	}
	if err != nil {
		return fail(nil, "%s", waitErr("neither prompt was answered", err))
	}
	var mb Msg // the second prompt's answer, once in
	if m.id == b {
		if m.IsError() {
			return pass("the second prompt was refused: %s", m.Get("error.message").Str)
		}
		if cancelN < 0 || m.Get("result.stopReason").Str != "cancelled" {
			return fail([]int{bMsg.N, m.N}, "the second prompt on the session was answered %s while the first was still running; one session runs one turn at a time", m.Get("result").Raw)
		}
		// Queued, and cancelled with the session: the first turn must
		// still end.
		mb = m
		if m, err = r.response(idA, r.opts.Timeout); err != nil {
			return fail([]int{bMsg.N, cancelN, mb.N}, "%s", waitErr("the first prompt was not answered after session/cancel", err))
		}
	}
	aN := m.N
	if cancelN < 0 && m.Get("result.stopReason").Str == "cancelled" {
		return fail([]int{bMsg.N, aN}, "the first prompt ended \"cancelled\" %s after the second prompt was sent, and the client sent no session/cancel: the agent preempted the running turn for the second prompt. \"cancelled\" is the stop reason of a turn the client cancelled; refuse the second prompt, or let it wait for the first turn to end",
			(m.At - bMsg.At).Round(time.Millisecond))
	}
	if mb.Raw == nil {
		if mb, err = r.response(b, r.opts.Timeout); err != nil {
			return fail([]int{bMsg.N, aN}, "%s; every request gets exactly one answer", waitErr("the second prompt was never answered after the first turn ended", err))
		}
		if mb.IsError() {
			return pass("the second prompt was refused: %s", mb.Get("error.message").Str)
		}
	}
	// Work of the second prompt before the first turn's answer: they ran
	// interleaved, whatever came after.
	if early := r.mentioning("hello.txt", bMsg.N, aN); len(early) > 0 {
		return fail([]int{bMsg.N, early[0], aN, mb.N}, "the second prompt's work (#%d names hello.txt) began before the first turn's answer: the agent ran the two turns interleaved; one session runs one turn at a time", early[0])
	}
	if mb.Get("result.stopReason").Str == "cancelled" {
		if cancelN < 0 {
			return fail([]int{bMsg.N, aN, mb.N}, "the second prompt ended \"cancelled\" although the client sent no session/cancel")
		}
		return pass("the second prompt was queued: cancelled with the first turn, without doing any work")
	}
	if after := r.turnContentBetween(r.sid, aN, mb.N); len(after) == 0 {
		lines := []int{bMsg.N}
		if during := r.turnContentBetween(r.sid, bMsg.N, aN); len(during) > 0 {
			lines = append(lines, during[len(during)-1])
		}
		return fail(append(lines, aN, mb.N), "the second prompt was answered %s with no update after the first turn's answer: its work ran while the first turn was still running; one session runs one turn at a time",
			mb.Get("result.stopReason").Raw)
	}
	if late := r.mentioning("hello.txt", aN, mb.N); len(late) > 0 {
		return pass("the second prompt was queued: its work began after the first turn ended")
	}
	return skip("inconclusive: the second prompt ran on after the first turn's answer, but nothing it did names hello.txt, so whether it began before that answer cannot be told; give a --file-prompt the agent answers by reading hello.txt")
}

// sent returns the client's request id as recorded.
func (r *run) sent(id string) Msg {
	for _, m := range r.messages() {
		if m.Out && m.IsRequest() && m.id == id {
			return m
		}
	}
	return Msg{N: -1}
}

// mentioning lists the indexes of the agent's messages in (from, to)
// that belong to the session, its updates and its requests to the
// client, and name s.
func (r *run) mentioning(s string, from, to int) []int {
	var out []int
	for _, m := range r.messages() {
		if m.N > from && (to < 0 || m.N < to) && (isUpdate(m, r.sid) || !m.Out && m.IsRequest()) && strings.Contains(string(m.Raw), s) {
			out = append(out, m.N)
		}
	}
	return out
}

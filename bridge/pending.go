package bridge

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

// request is one editor request the engine has not answered yet, or an
// internal request the engine made itself (the initialize replayed on a new
// link). It lives in the pending table until retired, which happens exactly
// once whatever answers it: the agent, a timeout, the cancel grace period,
// a lost link or shutdown.
type request struct {
	ref     translate.Ref
	id      json.RawMessage // the editor's raw id; nil for internal requests
	key     string          // canonical form of id
	method  string
	link    *link
	session string   // sessionId the request names, if any
	cwd     string   // session/new, load, resume: the cwd asked for
	dirs    []string // and the additionalDirectories
	// deadline is when the request times out (zero: it does not, or
	// not yet); timeout is the duration it was given (deadlines.go).
	deadline time.Time
	timeout  time.Duration
	// grace is the cancel grace timer of a cancelled prompt.
	grace   *time.Timer
	retired bool
	// params are kept for session/new, load and resume (durable.go);
	// then, for an internal request, gets its answer (durable.go).
	params json.RawMessage
	then   func(translate.Out)
}

// call is a request the engine sent to the editor on a translator's behalf.
type call struct {
	id   json.RawMessage // the editor-side id the engine gave it
	link *link
	ref  translate.Ref
}

// pendingTable is every request not answered yet: the one table that every
// exit path (answer, timeout, grace, link loss, shutdown) drains.
type pendingTable struct {
	byRef map[translate.Ref]*request
	byKey map[string]translate.Ref
}

func newPendingTable() pendingTable {
	return pendingTable{byRef: make(map[translate.Ref]*request), byKey: make(map[string]translate.Ref)}
}

func (p *pendingTable) add(req *request) {
	p.byRef[req.ref] = req
	if req.id != nil {
		p.byKey[req.key] = req.ref
	}
}

func (p *pendingTable) get(ref translate.Ref) *request { return p.byRef[ref] }

// byEditorID returns the pending request with the editor id key, if any.
func (p *pendingTable) byEditorID(key string) *request {
	if ref, ok := p.byKey[key]; ok {
		return p.byRef[ref]
	}
	return nil
}

func (p *pendingTable) remove(req *request) {
	delete(p.byRef, req.ref)
	if p.byKey[req.key] == req.ref {
		delete(p.byKey, req.key)
	}
}

// inOrder returns the pending requests oldest first.
func (p *pendingTable) inOrder() []*request {
	reqs := make([]*request, 0, len(p.byRef))
	for _, req := range p.byRef {
		reqs = append(reqs, req)
	}
	slices.SortFunc(reqs, func(a, b *request) int { return cmp.Compare(a.ref, b.ref) })
	return reqs
}

// retire forgets req and reports whether it was still pending. A second
// retire is a bug in the engine: it panics under test and is logged in
// production, where the second answer is then not written.
func (e *engine) retire(req *request) bool {
	if req.retired {
		msg := fmt.Sprintf("acp-bridge: request %s (%s) answered twice", req.id, req.method)
		if testing.Testing() {
			panic(msg)
		}
		e.log.Error(msg)
		return false
	}
	req.retired = true
	e.pending.remove(req)
	e.disarm(req)
	if req.grace != nil {
		req.grace.Stop()
	}
	if req.method == "session/prompt" {
		if s := e.sessions[req.session]; s != nil {
			s.prompts = removeRef(s.prompts, req.ref)
		}
	}
	return true
}

// answer writes result as req's answer. result is owned by the engine.
func (e *engine) answer(req *request, result json.RawMessage) {
	if !e.retire(req) {
		return
	}
	defer e.dequeue(req)
	e.turnEnded(req, result, false)
	e.writeAnswer(req, editorMsg{head: resultHead(req.id), body: result, tail: closeBrace}, false)
}

func (e *engine) fail(req *request, err *translate.Error) {
	e.failRaw(req, err.JSON())
}

func (e *engine) failRaw(req *request, errObj json.RawMessage) {
	if e.repeatRefused(req) {
		// An agent that forbids a repeated initialize (ACP v2 agents,
		// some servers) refused the editor's: the connection is still
		// initialized, and the editor gets the first answer again, as a
		// repeated initialize always does.
		e.log.Info("the agent refused a repeated initialize; answered with its first answer", "error", errorMessage(errObj))
		e.answer(req, bytes.Clone(e.init.result))
		return
	}
	if !e.retire(req) {
		return
	}
	defer e.dequeue(req)
	if e.b.Redact != nil {
		errObj = e.b.Redact(errObj) // for req.then and the log too
	}
	if req.id == nil {
		e.log.Error("internal request failed", "method", req.method, "error", string(errObj))
		if req.then != nil {
			req.then(translate.Out{Kind: translate.Fail, Ref: req.ref, Body: errObj})
		}
		return
	}
	e.turnEnded(req, errObj, true)
	e.writeAnswer(req, editorMsg{body: translate.ErrorFrame(req.id, errObj)}, true)
}

// writeAnswer writes the answer to an editor request. Some wait for the
// store first (see holdForStore): a turn the editor saw end survives a
// kill -9 of the bridge right after, and a session the editor saw closed
// can be opened in another window at once.
func (e *engine) writeAnswer(req *request, m editorMsg, failed bool) {
	if e.dur.holdForStore(req, m, failed) {
		return
	}
	e.writeEditorSession(m, req.session)
}

func resultHead(id json.RawMessage) []byte {
	head := make([]byte, 0, len(resultHeadPart)+len(id)+10)
	head = append(head, resultHeadPart...)
	head = append(head, id...)
	return append(head, `,"result":`...)
}

// translatorAnswer writes a translator's Reply or Fail for an editor request.
func (e *engine) translatorAnswer(l *link, o translate.Out) {
	req := e.pending.get(o.Ref)
	if req == nil {
		e.staleAnswer(l, o)
		return
	}
	if req.id == nil { // internal: the initialize replayed on a new link
		e.retire(req)
		if o.Kind == translate.Fail && req.method == "initialize" {
			e.log.Error("agent refused the replayed initialize", "link", l.String(), "error", string(o.Body))
		}
		if req.method == "initialize" && o.Kind == translate.Reply {
			l.queuesPrompts = queuesPrompts(o.Body)
		}
		if req.then != nil {
			req.then(o)
		}
		if req.method == "initialize" {
			e.sup.linkInitialized(l, req.ref, o)
		}
		return
	}
	if o.Kind == translate.Fail {
		if e.dur.ownLoadFailed(req, o.Body) {
			return
		}
		e.failRaw(req, o.Body)
		e.afterFailure(req, o.Body)
		return
	}
	result, err := e.afterSuccess(req, o.Body)
	if err != nil {
		e.fail(req, err)
		e.afterFailure(req, err.JSON())
		return
	}
	e.answer(req, result)
	e.afterAnswer(req, result)
}

// staleAnswer handles an answer for a request the engine already answered
// itself (timeout, cancel grace, link loss). The late answer to a prompt the
// engine ended after the grace period means that turn is over: its
// session's late updates are no longer dropped.
func (e *engine) staleAnswer(l *link, o translate.Out) {
	if sid, ok := e.abandoned[o.Ref]; ok {
		delete(e.abandoned, o.Ref)
		if s := e.sessions[sid]; s != nil && s.draining {
			s.draining = false
			e.log.Info("agent ended the turn the bridge had already answered; late updates no longer dropped", "session", sid)
		}
	}
	e.log.Debug("late answer for a request already answered dropped", "link", l.String())
}

// --- timeouts --------------------------------------------------------------------

// untimed methods may legitimately take as long as a person or a model needs
// (60 s defaults in other proxies killed long tool calls): no default
// timeout.
var untimed = map[string]bool{"session/prompt": true, "authenticate": true}

// armTimeout starts req's timeout unless its method may run unbounded.
func (e *engine) armTimeout(req *request) {
	if e.b.RequestTimeout < 0 || untimed[req.method] || !req.deadline.IsZero() {
		return
	}
	d := e.b.RequestTimeout
	if d == 0 {
		d = defaultRequestTimeout
	}
	e.arm(req, d)
}

func (e *engine) timeout(req *request, d time.Duration) {
	if req.retired {
		return
	}
	e.log.Warn("agent did not answer in time", "method", req.method, "timeout", d)
	err := translate.Errorf(translate.CodeInternalError,
		"the agent did not answer %s within %s: it may be overloaded or stuck; try again, or raise --request-timeout", req.method, d)
	e.fail(req, err)
	e.afterFailure(req, err.JSON())
	if req.link != nil && req.link.down == nil {
		e.feed(req.link, translate.Msg{Kind: translate.Abandon, Ref: req.ref})
	}
}

func removeRef(refs []translate.Ref, ref translate.Ref) []translate.Ref {
	for i, r := range refs {
		if r == ref {
			return append(refs[:i], refs[i+1:]...)
		}
	}
	return refs
}

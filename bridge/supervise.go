package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

// supervisor opens the engine's agent links and watches them come up and
// go down (loop-owned).
type supervisor struct {
	e *engine
}

// ensureControl returns the control link, dialling it again if it was lost
// (the link supervisor: a lost link comes back for the next request that
// needs it; the agent is initialized again before that request reaches it).
func (sv *supervisor) ensureControl() (*link, *translate.Error) {
	if sv.e.control != nil && sv.e.control.down == nil {
		return sv.e.control, nil
	}
	if sv.e.b.Dialect.NoControlLink {
		sv.e.control = sv.newDetached()
		return sv.e.control, nil
	}
	reconnect := sv.e.control != nil
	sv.e.control = sv.newLink(Spawn{}, sv.e.b.defaultBinding(), nil)
	sv.e.control.control = true
	if reconnect {
		sv.e.log.Info("dialling the agent again", "link", sv.e.control.String(), "after", sv.e.control.delay)
	}
	if sv.e.init == initDone {
		sv.replayInitialize(sv.e.control)
	}
	return sv.e.control, nil
}

// newLink starts dialling an agent link in the background, after the
// reconnect backoff if earlier dials failed. Frames the translator produces
// before the dial completes wait in the link's queue. tr nil means a new
// translator of bind.
func (sv *supervisor) newLink(spawn Spawn, bind Binding, tr translate.Translator) *link {
	if tr == nil {
		tr = bind.NewTranslator()
	}
	sv.e.v2.v2Link(tr)
	sv.e.nextLinkID++
	ctx, cancel := context.WithCancel(sv.e.ctx)
	l := &link{id: sv.e.nextLinkID, spawn: spawn, bind: bind, tr: tr, calls: make(map[translate.Ref]string), cancel: cancel}
	l.out.init(sv.queueBytes(), sv.e.drained)
	l.delay = sv.e.dialing.delay(time.Now())
	sv.e.links = append(sv.e.links, l)
	sv.e.linkWG.Add(1)
	go sv.runLink(ctx, l)
	sv.e.log.Debug("agent link opening", "link", l.String(), "cwd", spawn.Cwd)
	return l
}

// runLink is the goroutine of one link (named so stack dumps read).
func (sv *supervisor) runLink(ctx context.Context, l *link) {
	defer sv.e.linkWG.Done()
	l.run(ctx, l.bind.Dial, sv.e.inbox)
}

// newDetached makes the control "link" of a dialect that needs no agent for
// connection-level requests: a translator with no connection.
func (sv *supervisor) newDetached() *link {
	sv.e.nextLinkID++
	l := &link{id: sv.e.nextLinkID, bind: sv.e.b.defaultBinding(), tr: sv.e.b.NewTranslator(), calls: make(map[translate.Ref]string),
		control: true, detached: true, up: true, cancel: func() {}}
	l.out.init(sv.queueBytes(), nil)
	return l
}

func (sv *supervisor) queueBytes() int {
	if sv.e.b.QueueBytes > 0 {
		return sv.e.b.QueueBytes
	}
	return defaultQueueBytes
}

// replayInitialize feeds a new link the editor's initialize, as an internal
// request, so that the agent behind it is initialized before anything else.
func (sv *supervisor) replayInitialize(l *link) { sv.initLink(l, nil) }

// initLink sends a new link the editor's initialize as an internal request
// and gates the link until it is answered: whatever the engine feeds the
// link meanwhile waits (see feed), so the agent sees initialize first and
// nothing else before its answer. then, if not nil, gets the answer.
func (sv *supervisor) initLink(l *link, then func(translate.Out)) {
	sv.e.nextRef++
	req := &request{ref: sv.e.nextRef, method: "initialize", link: l, then: then}
	sv.e.pending.add(req)
	l.initRef = req.ref
	sv.e.feed(l, translate.Msg{Kind: translate.Request, Ref: req.ref, Method: "initialize", Body: sv.e.initParams})
}

// linkInitialized opens l's gate once its initialize is answered: the
// messages held for it are fed in order. When the agent refused the
// initialize, the requests held are failed with its words instead (sending
// them would only earn each the same refusal, in the agent's terms).
func (sv *supervisor) linkInitialized(l *link, ref translate.Ref, o translate.Out) {
	if l.initRef != ref {
		return
	}
	l.initRef = 0
	gated := l.gated
	l.gated = nil
	for _, m := range gated {
		if l.down != nil {
			return // linkLost answered what depended on the link
		}
		if m.Kind == translate.Request {
			req := sv.e.pending.get(m.Ref)
			if req == nil || req.retired {
				continue // answered meanwhile (a timeout, a cancel)
			}
			if o.Kind == translate.Fail {
				err := translate.Errorf(translate.CodeInternalError,
					"agent %s refused initialize on a new connection, so %s was not sent: %s", l.bind.displayName(), m.Method, errorMessage(o.Body))
				sv.e.fail(req, err)
				sv.e.afterFailure(req, err.JSON())
				continue
			}
		} else if o.Kind == translate.Fail {
			continue
		}
		sv.e.feed(l, m)
	}
}

// openSessionLink opens the link of a session of its own (a per-session
// dialect, or an agent BindSession picked): the dialect may build the
// agent's command line from the request, the editor's initialize is
// replayed on the new link, then the request follows. sid is the session
// id the engine chose; an agent whose dialect is not per-session picks its
// own in its answer, and the session is known by that one from then on.
func (sv *supervisor) openSessionLink(req *request, params json.RawMessage, sid string, bind Binding) {
	tr := bind.NewTranslator()
	spawn := Spawn{Cwd: req.cwd, Session: sid}
	msg := translate.Msg{Kind: translate.Request, Ref: req.ref, Method: req.method, Body: params, Session: sid, At: time.Now()}
	if sb, ok := tr.(translate.SpawnBuilder); ok {
		cmd, err := sb.BuildSpawn(msg)
		if err != nil {
			sv.e.fail(req, translate.Errorf(translate.CodeInvalidParams, "%s: %v", req.method, err))
			return
		}
		spawn.Command = cmd
	}
	req.session = sid
	l := sv.newLink(spawn, bind, tr)
	req.link = l
	sv.e.sessions[sid] = &session{id: sid, link: l, cwd: req.cwd, dirs: req.dirs}
	sv.replayInitialize(l)
	sv.e.feed(l, msg)
}

// linkUp feeds the translator the news that its connection is established.
func (sv *supervisor) linkUp(l *link) {
	if l.down != nil {
		return
	}
	l.up = true
	sv.e.dialing.succeeded()
	sv.e.log.Debug("agent link up", "link", l.String())
	sv.e.feed(l, translate.Msg{Kind: translate.LinkUp})
}

// linkLost answers everything that depended on l (no request may wait
// forever on an agent that is gone): pending
// editor requests get an error naming the cause, the editor is told to drop
// the requests l had made of it, and sessions on l are marked lost. The
// next request that needs a control link dials a new one.
func (sv *supervisor) linkLost(l *link, err error) {
	if l.down != nil {
		return
	}
	var de *dialError
	if errors.As(err, &de) {
		sv.e.dialing.failed(time.Now())
	}
	l.down = sv.linkError(l, err)
	// What waited for the link's initialize is answered below, with the
	// pending requests that depend on the link.
	l.initRef, l.gated = 0, nil
	if l.closedByEngine() {
		sv.e.log.Debug("agent link closed", "link", l.String(), "cause", l.down.Reason)
	} else {
		sv.e.log.Error("agent link lost", "link", l.String(), "error", l.down.Reason)
	}
	sv.stopWake(l)
	for _, req := range sv.e.pending.inOrder() {
		if req.link == l {
			sv.e.fail(req, l.down)
			sv.e.afterFailure(req, l.down.JSON())
		}
	}
	for _, key := range sortedKeys(l.calls) {
		if c := sv.e.calls[key]; c != nil {
			sv.e.cancelEditorCall(c)
		}
	}
	for _, s := range sv.e.sessions.on(l) {
		if sv.e.v2.on {
			sv.e.v2.v2LinkLost(s.id, l.down)
		}
		sv.e.dur.onSession(SessionEvent{Kind: SessionLost, Session: s.id, Body: l.down.JSON()})
	}
	sv.e.feed(l, translate.Msg{Kind: translate.LinkDown, Error: l.down.JSON()})
	sv.closeLinkAsync(l)
	sv.e.links = slices.DeleteFunc(sv.e.links, func(x *link) bool { return x == l })
}

// linkError is the error that requests depending on l are answered with:
// the transport's own sentence (legacy names the URL or command and the
// cause), the agent's name in data.
func (sv *supervisor) linkError(l *link, err error) *translate.Error {
	reason := err.Error()
	if errors.Is(err, context.Canceled) && sv.e.ctx.Err() != nil {
		reason = "acp-bridge is shutting down"
	}
	name := l.bind.Name
	if name == "" {
		name = "agent"
	}
	return translate.Errorf(translate.CodeInternalError, "%s", reason).With("agent", name)
}

// retireLink closes a link the engine no longer needs.
func (sv *supervisor) retireLink(l *link, why string) {
	if l.down != nil || l.detached {
		return
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	sv.linkLost(l, errors.New(why))
}

// armWake arms the translator's Timer: a Tick after d. A new Timer output
// replaces the pending one.
func (sv *supervisor) armWake(l *link, d time.Duration) {
	sv.stopWake(l)
	l.wake = time.AfterFunc(d, func() {
		sv.e.post(func() {
			if l.down == nil {
				l.wake = nil
				sv.e.feed(l, translate.Msg{Kind: translate.Tick})
			}
		})
	})
}

func (sv *supervisor) stopWake(l *link) {
	if l.wake != nil {
		l.wake.Stop()
		l.wake = nil
	}
}

// closeLinks closes links in parallel (each child gets its staged stop,
// fitted to deadline) and waits for every link goroutine.
func (sv *supervisor) closeLinks(links []*link, deadline time.Time, done chan<- struct{}) {
	defer close(done)
	for _, l := range links {
		sv.e.linkWG.Add(1)
		go func() {
			defer sv.e.linkWG.Done()
			l.closeBy(deadline)
		}()
	}
	sv.e.linkWG.Wait()
}

// closeLinkAsync closes l off the loop: stopping a child process can take
// its whole grace period.
func (sv *supervisor) closeLinkAsync(l *link) {
	sv.e.linkWG.Add(1)
	go func() {
		defer sv.e.linkWG.Done()
		l.close()
	}()
}

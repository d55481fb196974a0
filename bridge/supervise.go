package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
)

// linkHooks is what link supervision asks of the rest of the engine: the
// translators, the request table, the editor's initialize, and what
// depends on a link. *engine implements it (hooks.go). Every method but
// post is called on the loop only.
type linkHooks interface {
	// feed hands m to l's translator, in order; while l's initialize is
	// unanswered (initLink), what else l is fed waits in l.gated.
	feed(l *link, m translate.Msg)
	// fail answers req with err, exactly once (a later answer is dropped).
	fail(req *request, err *translate.Error)
	// afterFailure undoes what a failed request had started (a session
	// being opened on a link of its own is forgotten, that link retired).
	afterFailure(req *request, errObj json.RawMessage)
	// post runs f on the loop; from any goroutine. Once Serve stops, f
	// is dropped.
	post(f func())
	// editorInitialized reports whether the editor's initialize has been
	// answered, so that a new link must be sent it first (initLink).
	editorInitialized() bool
	// initLink sends l the editor's initialize as a request of the
	// bridge's own and gates l until it is answered: l.initRef names it,
	// and whatever l is fed meanwhile waits in l.gated (linkInitialized
	// opens the gate). then, if not nil, gets the answer.
	initLink(l *link, then func(translate.Out))
	// linkDown answers everything that depended on l, which is down
	// (l.down says why): its pending requests fail with l.down (and what
	// they started is undone), the editor is told to drop the requests l
	// made of it, and l's sessions are reported lost.
	linkDown(l *link)
}

// v2Links is what the supervisor asks of the v2 editor (*v2editor).
type v2Links interface {
	// v2Link tells a new link's translator that the editor speaks ACP v2,
	// when the link relays it.
	v2Link(tr translate.Translator)
}

// supervisor opens the engine's agent links and watches them come up and
// go down (loop-owned). It owns the links; it reaches the rest of the
// engine through core alone.
type supervisor struct {
	core linkHooks
	v2   v2Links
	cfg  *Bridge // its configuration: Dialect, NewTranslator, QueueBytes, the agent
	log  hclog.Logger
	// ctx is Serve's: the links' contexts derive from it.
	ctx context.Context
	// inbox and drained are the loop's: where links put what they read,
	// and how a link queue tells it it fell back under its bound.
	inbox   *inbox
	drained chan struct{}
	// pending is the core's request table, shared for reading (the
	// requests a link's gate held); only the core adds and retires them.
	pending *pendingTable
	// sessions is the engine's session table, shared with the core (the
	// same map): a session of its own link is filed here when the link
	// opens.
	sessions sessionTable

	// links are the live links; control is the one sessions share (nil
	// until the first request needs it), possibly lost.
	links      []*link
	control    *link
	nextLinkID int
	dialing    backoff
	linkWG     sync.WaitGroup // the links' goroutines
}

// start makes sv the link supervisor of a Serve, reaching the rest of its
// engine through core.
func (sv *supervisor) start(core linkHooks, v2 v2Links, cfg *Bridge, log hclog.Logger, ctx context.Context, inbox *inbox, drained chan struct{}, pending *pendingTable, sessions sessionTable) {
	sv.core, sv.v2, sv.cfg, sv.log, sv.ctx = core, v2, cfg, log, ctx
	sv.inbox, sv.drained, sv.pending, sv.sessions = inbox, drained, pending, sessions
	sv.dialing = backoff{min: cfg.ReconnectBackoff, max: cfg.ReconnectBackoffMax}
	if sv.dialing.min <= 0 {
		sv.dialing.min = defaultBackoff
	}
	if sv.dialing.max <= 0 {
		sv.dialing.max = defaultBackoffMax
	}
}

// The supervisor serves the durable part's links (linkOpener, durable.go).
var _ linkOpener = (*supervisor)(nil)

// controlLink is the shared link: ensured (dialled again) with open.
func (sv *supervisor) controlLink(open bool) (*link, *translate.Error) {
	if !open {
		return sv.control, nil
	}
	return sv.ensureControl()
}

// openLink opens a link of a session's own and initializes it.
func (sv *supervisor) openLink(spawn Spawn, bind Binding, tr translate.Translator, then func(*link, translate.Out)) {
	l := sv.newLink(spawn, bind, tr)
	sv.core.initLink(l, func(o translate.Out) { then(l, o) })
}

// ensureControl returns the control link, dialling it again if it was lost
// (the link supervisor: a lost link comes back for the next request that
// needs it; the agent is initialized again before that request reaches it).
func (sv *supervisor) ensureControl() (*link, *translate.Error) {
	if sv.control != nil && sv.control.down == nil {
		return sv.control, nil
	}
	if sv.cfg.Dialect.NoControlLink {
		sv.control = sv.newDetached()
		return sv.control, nil
	}
	reconnect := sv.control != nil
	sv.control = sv.newLink(Spawn{}, sv.cfg.defaultBinding(), nil)
	sv.control.control = true
	if reconnect {
		sv.log.Info("dialling the agent again", "link", sv.control.String(), "after", sv.control.delay)
	}
	if sv.core.editorInitialized() {
		sv.core.initLink(sv.control, nil)
	}
	return sv.control, nil
}

// newLink starts dialling an agent link in the background, after the
// reconnect backoff if earlier dials failed. Frames the translator produces
// before the dial completes wait in the link's queue. tr nil means a new
// translator of bind.
func (sv *supervisor) newLink(spawn Spawn, bind Binding, tr translate.Translator) *link {
	if tr == nil {
		tr = bind.NewTranslator()
	}
	sv.v2.v2Link(tr)
	sv.nextLinkID++
	ctx, cancel := context.WithCancel(sv.ctx)
	l := &link{id: sv.nextLinkID, spawn: spawn, bind: bind, tr: tr, calls: make(map[translate.Ref]string), cancel: cancel,
		offers: make(chan *lease, 1)}
	l.out.init(sv.queueBytes(), sv.drained)
	l.delay = sv.dialing.delay(time.Now())
	sv.links = append(sv.links, l)
	sv.linkWG.Add(1)
	go sv.runLink(ctx, l)
	sv.log.Debug("agent link opening", "link", l.String(), "cwd", spawn.Cwd)
	return l
}

// runLink is the goroutine of one link (named so stack dumps read).
func (sv *supervisor) runLink(ctx context.Context, l *link) {
	defer sv.linkWG.Done()
	l.run(ctx, l.bind.Dial, sv.inbox)
}

// newDetached makes the control "link" of a dialect that needs no agent for
// connection-level requests: a translator with no connection.
func (sv *supervisor) newDetached() *link {
	sv.nextLinkID++
	l := &link{id: sv.nextLinkID, bind: sv.cfg.defaultBinding(), tr: sv.cfg.NewTranslator(), calls: make(map[translate.Ref]string),
		control: true, detached: true, up: true, cancel: func() {}}
	l.out.init(sv.queueBytes(), nil)
	return l
}

func (sv *supervisor) queueBytes() int {
	if sv.cfg.QueueBytes > 0 {
		return sv.cfg.QueueBytes
	}
	return defaultQueueBytes
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
			req := sv.pending.get(m.Ref)
			if req == nil || req.retired {
				continue // answered meanwhile (a timeout, a cancel)
			}
			if o.Kind == translate.Fail {
				err := translate.Errorf(translate.CodeInternalError,
					"agent %s refused initialize on a new connection, so %s was not sent: %s", l.bind.displayName(), m.Method, errorMessage(o.Body))
				sv.core.fail(req, err)
				sv.core.afterFailure(req, err.JSON())
				continue
			}
		} else if o.Kind == translate.Fail {
			continue
		}
		sv.core.feed(l, m)
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
			sv.core.fail(req, translate.Errorf(translate.CodeInvalidParams, "%s: %v", req.method, err))
			return
		}
		spawn.Command = cmd
	}
	req.session = sid
	l := sv.newLink(spawn, bind, tr)
	req.link = l
	sv.sessions[sid] = &session{id: sid, link: l, cwd: req.cwd, dirs: req.dirs}
	sv.core.initLink(l, nil)
	sv.core.feed(l, msg)
}

// linkUp feeds the translator the news that its connection is established.
func (sv *supervisor) linkUp(l *link) {
	if l.down != nil {
		return
	}
	l.up = true
	sv.dialing.succeeded()
	sv.log.Debug("agent link up", "link", l.String())
	sv.core.feed(l, translate.Msg{Kind: translate.LinkUp})
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
		sv.dialing.failed(time.Now())
	}
	l.down = sv.linkError(l, err)
	// What waited for the link's initialize is answered below, with the
	// pending requests that depend on the link.
	l.initRef, l.gated = 0, nil
	if l.closedByEngine() {
		sv.log.Debug("agent link closed", "link", l.String(), "cause", l.down.Reason)
	} else {
		sv.log.Error("agent link lost", "link", l.String(), "error", l.down.Reason)
	}
	if l.wake != nil {
		// Nothing more can come from the agent, so what the translator
		// holds until its timer (the shim's answer held for a quiet
		// period, for late updates) is due now, before the requests
		// still pending are failed: an answer the agent gave is not
		// turned into an error. A translator that ticks by deadlines
		// finds none due yet.
		sv.stopWake(l)
		sv.core.feed(l, translate.Msg{Kind: translate.Tick})
	}
	sv.core.linkDown(l)
	sv.core.feed(l, translate.Msg{Kind: translate.LinkDown, Error: l.down.JSON()})
	sv.closeLinkAsync(l)
	sv.links = slices.DeleteFunc(sv.links, func(x *link) bool { return x == l })
}

// linkError is the error that requests depending on l are answered with:
// the transport's own sentence (legacy names the URL or command and the
// cause), the agent's name in data.
func (sv *supervisor) linkError(l *link, err error) *translate.Error {
	reason := err.Error()
	if errors.Is(err, context.Canceled) && sv.ctx.Err() != nil {
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
		sv.core.post(func() {
			if l.down == nil {
				l.wake = nil
				sv.core.feed(l, translate.Msg{Kind: translate.Tick})
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
		sv.linkWG.Add(1)
		go func() {
			defer sv.linkWG.Done()
			l.closeBy(deadline)
		}()
	}
	sv.linkWG.Wait()
}

// closeLinkAsync closes l off the loop: stopping a child process can take
// its whole grace period.
func (sv *supervisor) closeLinkAsync(l *link) {
	sv.linkWG.Add(1)
	go func() {
		defer sv.linkWG.Done()
		l.close()
	}()
}

package bridge

import (
	"bytes"
	"maps"
	"unsafe"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
)

// The stream's fast path.
//
// A turn streams thousands of session/update notifications that the
// translator passes on untouched. Sent through the loop, each pays two
// goroutine hand-offs (reader → loop → writer) and the loop's time, which
// every message of every link shares: the loop, not the work, bounds the
// stream. So while a session's turn runs and nothing of the engine's state
// has anything to do with its updates, the link's goroutine hands them to
// the editor writer (and to the session store) itself.
//
// The loop stays the owner of every decision. It publishes, per link, the
// sessions whose updates may pass (link.fast), computed from its own state
// and the translator's (translate.UpdatePasser) when it has handled an event
// and before it waits for the next one. The gate is a mutex the loop holds
// for as long as it handles an event. A link's goroutine passes an update
// only while it holds the gate, only when the update's session is in the
// table (read again under the gate), and only once the loop has handled
// every event the link put in the inbox before (link.inflight; the link
// waits for that, which ends a stream's detour through the loop at once):
// so the editor and the store get a link's messages in the order the agent
// sent them, every state change the loop makes is seen by the next update
// the link reads, and an answer the loop writes comes after every update
// read before it. An update that cannot take the fast path (the writer's
// queue is full, the frame needs a repair, the session is not in the table)
// takes the loop's, which does all it did before. The link never waits for
// anything while it holds the gate; it holds it once for a run of updates
// it reads without waiting (linkBatch).

// fastTable maps the sessions whose updates a link's goroutine may pass on,
// by the id the agent gives them (a renamed session's backend id), to what
// it needs for them. The loop replaces it whole (copy on write); the link
// reads it under the gate.
type fastTable map[string]*fastSession

// fastSession is a session in a fastTable. Its fields are guarded by
// engine.gate.
type fastSession struct {
	// key is the session's key in the table.
	key string
	// record says the session is recorded in the store; prefix is the
	// start of its params as relays write them (see recordBody), and
	// agentPrefix the same with the id the agent gives it.
	record              bool
	prefix, agentPrefix []byte
	// session is the session's own id, which the store records it under.
	session string
	// rename, when not nil, is the session's own id as JSON: the agent
	// names it by another (its backend id, see unalias), which the link
	// replaces with this in each update it passes.
	rename []byte
	// updates and bytes count what passed since the loop last collected
	// them for Bridge.OnSession (SessionStreamed).
	updates, bytes int
}

// shutGate, once the loop has returned, empties every link's table and
// opens the gate for good: a link waiting for it then finds nothing to pass.
func (e *engine) shutGate() {
	for id, on := range e.fastOn {
		on.link.flushRecords()
		delete(e.fastOn, id)
		on.link.fast.Store(nil)
	}
	e.loopDone = true
	e.gate.Unlock()
}

// closeGate is the loop's first step on waking: it takes the gate, so that
// no update passes while it handles the event, and hands OnSession what
// passed while it waited.
func (e *engine) closeGate() {
	e.gate.Lock()
	e.collectStreamed()
}

// openGate is the loop's last step before it waits: it publishes which
// sessions' updates may pass until it wakes again, and lets them.
func (e *engine) openGate() {
	e.refreshFast()
	e.gate.Unlock()
}

// collectStreamed counts the updates that passed on the fast path since the
// last call, and tells OnSession of them. The gate is held.
func (e *engine) collectStreamed() {
	for id, on := range e.fastOn {
		on.link.flushRecords()
		fs := on.link.table()[on.key]
		if fs == nil || fs.updates == 0 {
			continue
		}
		e.streamed += fs.bytes
		if e.b.OnSession != nil {
			e.b.OnSession(SessionEvent{Kind: SessionStreamed, Session: id, Updates: fs.updates, Bytes: fs.bytes})
		}
		fs.updates, fs.bytes = 0, 0
	}
}

// refreshFast recomputes the fast-path table of every session with a turn
// running. The gate is held.
func (e *engine) refreshFast() {
	if len(e.streaming) == 0 {
		return
	}
	on := e.fastAllowed()
	for id := range e.streaming {
		s := e.sessions[id]
		var want *link
		key := id
		if on && s != nil && e.passes(s) {
			want, key = s.link, fastKey(s)
		}
		if cur, ok := e.fastOn[id]; ok && (cur.link != want || cur.key != key) {
			e.collectStreamed() // (what passed is told before the table changes)
			t := maps.Clone(cur.link.table())
			delete(t, cur.key)
			cur.link.fast.Store(&t)
			delete(e.fastOn, id)
		}
		if want != nil {
			fs := want.table()[key]
			if fs == nil {
				fs = &fastSession{key: key}
				t := maps.Clone(want.table())
				if t == nil {
					t = fastTable{}
				}
				t[key] = fs
				want.fast.Store(&t)
				e.fastOn[id] = fastEntry{link: want, key: key}
			}
			// (The ids as JSON are made once per table entry, not at
			// each of the loop's events.)
			if fs.session != id {
				fs.session, fs.rename, fs.agentPrefix = id, nil, nil
			}
			if key != id && fs.rename == nil {
				fs.rename = []byte(mustJSON(id))
			}
			fs.record, fs.prefix = false, nil
			if e.durable() && s.b != nil && s.b.owned {
				fs.record, fs.prefix = true, sessionPrefix(s)
				if fs.agentPrefix == nil {
					fs.agentPrefix = fs.prefix
					if key != id {
						fs.agentPrefix = []byte(`{"sessionId":` + mustJSON(key) + `,"update":`)
					}
				}
			}
		}
		if s == nil || len(s.prompts) == 0 {
			delete(e.streaming, id)
		}
	}
}

// fastEntry is where a session's updates take the fast path: the link and
// the key of its table.
type fastEntry struct {
	link *link
	key  string
}

// fastKey is the id the agent gives s: its backend id when the store
// renamed it (passes has checked that the alias holds), else its own.
func fastKey(s *session) string {
	if s.b != nil && s.b.backend != "" {
		return s.b.backend
	}
	return s.id
}

// fastAllowed reports whether the engine's hooks let updates pass its
// loop: they all see every message on it, but for a session hook that
// takes a stream's updates in bulk. A v2 editor's front (v2front.go)
// translates every message the engine writes, and a v2 relay's notify
// drops a cancelled turn's late updates (v2relay.go), so neither's
// updates pass.
func (e *engine) fastAllowed() bool {
	return e.front == nil && !e.v2.on && !e.v2.trying && e.b.Tap == nil && !e.log.IsTrace() && (e.b.OnSession == nil || e.b.OnSessionBulk)
}

// passes reports whether the updates of s may take the fast path now:
// whether notify would write them to the editor as the agent wrote them,
// and the translator pass them so.
func (e *engine) passes(s *session) bool {
	l := s.link
	if len(s.prompts) == 0 || s.draining || l == nil || l.down != nil || !l.up || l.initRef != 0 {
		return false
	}
	p, ok := l.tr.(translate.UpdatePasser)
	if !ok {
		return false
	}
	if e.durable() {
		if s.b != nil && s.b.suppress {
			return false // its updates are history being replayed
		}
		if s.b != nil && s.b.backend != "" {
			// Renamed: the agent's id for it must map to it on this link,
			// as unalias would map it, and to nothing else.
			if s.b.backendLink != l || e.dur.alias[aliasKey{l, s.b.backend}] != s || e.dur.gone[aliasKey{l, s.b.backend}] {
				return false
			}
		} else if a := e.dur.alias[aliasKey{l, s.id}]; a != nil && a != s {
			return false // the agent's s.id is another session's backend
		}
		for _, a := range e.dur.answers {
			if a.session == s.id {
				return false // its messages wait behind a held answer
			}
		}
	}
	return p.PassesUpdates(fastKey(s))
}

// records returns the link's run of update records for st. The gate is
// held.
func (l *link) records(st *store.Store) *store.Lines {
	if l.lines == nil {
		l.lines = st.Lines()
	}
	return l.lines
}

// flushRecords hands the link's run of records to the store. The gate is
// held.
func (l *link) flushRecords() {
	if l.lines != nil {
		l.lines.Flush()
	}
}

// idle is the link's goroutine about to wait for its agent (OnIdle): the
// editor's writer is woken for the updates passed, and the records
// gathered go to the store. If the loop holds the gate it has taken the
// records already (collectStreamed), and none can have come since.
func (e *engine) idle(l *link) {
	if l.batch.held {
		// The records of the batch, and those before it, go to the store
		// under the gate the batch holds.
		l.flushRecords()
		e.endBatch(l)
		e.out.kick()
		return
	}
	e.out.kick()
	if l.lines != nil && e.gate.TryLock() {
		l.flushRecords()
		e.gate.Unlock()
	}
}

// table returns l's fast table (nil when empty).
func (l *link) table() fastTable {
	if t := l.fast.Load(); t != nil {
		return *t
	}
	return nil
}

// passUpdate is the fast path, on the goroutine of link l that read ev: it
// reports whether it handed ev to the editor (and the store), else ev is
// for the loop. done ends a wait for the loop.
func (e *engine) passUpdate(l *link, ev *agentEvent, done <-chan struct{}) bool {
	env := &ev.env
	if !ev.parsed || ev.perr != nil || ev.compacted || env.Method != "session/update" || env.ID != nil ||
		env.SessionID == "" || len(ev.frame) >= largeMessage {
		return false
	}
	t := l.fast.Load()
	if t == nil {
		return false
	}
	fs := l.lookup(t, env.SessionID)
	if fs == nil || !l.pass(ev.frame, env) {
		return false
	}
	if b := &l.batch; b.held {
		// (t is the table the batch began with: the loop replaces it
		// only under the gate, which the batch holds.)
		if e.batches(l, fs, ev) && len(b.buf)+len(ev.frame)+1 <= b.room {
			b.add(ev.frame)
			e.passed(l, fs, env, &editorMsg{body: ev.frame, oneLine: true})
			return true
		}
		e.endBatch(l)
	}
	for l.inflight.Load() != 0 {
		if l.kicks {
			e.out.kick() // (before waiting for the loop)
		}
		select {
		case <-l.caughtUp: // the loop handled this link's last event
		case <-done:
			return false
		}
	}
	// (Unlocked at each return: a deferred call cost more than the
	// rest of the locking.)
	e.gate.Lock()
	if cur := l.fast.Load(); cur != t {
		// The loop changed the table meanwhile (it replaces it whole:
		// the same table means the same sessions).
		if t = cur; t == nil {
			e.gate.Unlock()
			return false
		}
		if fs = (*t)[env.SessionID]; fs == nil {
			e.gate.Unlock()
			return false
		}
	}
	if e.batches(l, fs, ev) {
		if !e.beginBatch(l, len(ev.frame)+1) {
			e.gate.Unlock()
			return false
		}
		l.batch.add(ev.frame)
		e.passed(l, fs, env, &editorMsg{body: ev.frame, oneLine: true})
		return true // (the gate stays held: see beginBatch)
	}
	// The stream's usual update goes out as the agent wrote it; a renamed
	// session's, in three parts around its own id, so that renaming
	// copies nothing; a redacted one, scrubbed.
	m := editorMsg{body: ev.frame, oneLine: true}
	if fs.rename == nil && e.b.Redact == nil && (ev.borrowed || len(ev.frame) < maxCarved) {
		if !e.out.trySendLine(ev.frame, l.kicks) {
			e.gate.Unlock()
			return false
		}
	} else {
		if fs.rename != nil {
			head, tail, ok := aroundID(ev.frame, env.SessionID)
			if !ok {
				e.gate.Unlock()
				return false
			}
			m = editorMsg{head: head, body: fs.rename, tail: tail, oneLine: true}
		}
		if e.b.Redact != nil {
			m = editorMsg{body: e.b.Redact(m.joined()), oneLine: true}
		}
		// A borrowed frame is copied into the writer's own blocks, and
		// then the link is done with it (see borrowingLink); so is any
		// update that fits a block, whose copy costs less than the
		// writer's handling of a message of its own (it joins the run
		// of copied updates, trySend).
		if !e.out.trySend(&m, l.kicks, ev.borrowed || m.size() <= maxCarved) {
			e.gate.Unlock()
			return false
		}
	}
	e.passed(l, fs, env, &m)
	e.gate.Unlock()
	return true
}

// passed records an update handed to the editor as m, and counts it. The
// gate is held.
func (e *engine) passed(l *link, fs *fastSession, env *translate.Envelope, m *editorMsg) {
	if fs.record {
		// Gathered in the link's own run of records, which reaches the
		// store when it fills, when the link is about to wait, and when
		// the loop takes the gate (collectStreamed), so before any record
		// of the loop's: one lock of the store's per run, not per update.
		e.recordPassed(l.records(e.b.Sessions.Store), fs, env, m)
	}
	fs.updates++
	fs.bytes += len(env.Params)
}

// A batch is a run of a stream's updates that a link's goroutine passes
// holding the gate throughout, from the first until its read is about to
// wait (idle), until an event that is not such an update, or until
// batchBytes: the gate and the writer's lock are then taken once per
// batch, not once per update, and the batch reaches the editor in one
// piece, as the agent wrote it (publish). Through a child agent the two
// locks of every update, and its copy into the writer's blocks, were a
// fifth of the bridge's own CPU beyond the parse (perf, 1M updates).
//
// The link never waits for anything while it holds the gate: its reads
// call idle before they wait, which ends the batch, and whatever the
// goroutine does next that is not a batch's update (the loop's inbox, an
// inline answer, a frame of another kind) ends it first. The loop, which
// takes the gate to handle an event, waits at most for one batch's
// worth of updates.
type linkBatch struct {
	held  bool
	buf   []byte // the updates, each with its newline
	room  int    // the most buf may hold: what the writer's queue had room for
	lines int
}

// testHookBatch, set by tests only, is told of every batch endBatch hands
// over: how many updates it holds.
var testHookBatch func(updates int)

// batchBytes bounds a batch: the time the loop may wait for the gate, about
// 200 updates' worth of the link's work.
const batchBytes = blockSize

func (b *linkBatch) add(frame []byte) {
	b.buf = append(append(b.buf, frame...), '\n')
	b.lines++
}

// batches reports whether ev, an update of fs that passes, joins a batch:
// one that goes out as the agent wrote it (not renamed, nothing to
// scrub) and is small, on a link whose reads tell it before they wait.
func (e *engine) batches(l *link, fs *fastSession, ev *agentEvent) bool {
	return l.kicks && fs.rename == nil && e.b.Redact == nil && len(ev.frame) < maxCarved
}

// beginBatch starts a batch of l's for a first update of n
// bytes, if the writer's queue has room for it now; the gate is held, and
// stays held until endBatch.
func (e *engine) beginBatch(l *link, n int) bool {
	room, ok := e.out.space(n)
	if !ok {
		return false
	}
	b := &l.batch
	if cap(b.buf) < batchBytes {
		b.buf = make([]byte, 0, blockSize)
	}
	b.held, b.room = true, min(room, batchBytes)
	return true
}

// endBatch hands l's batch, if any, to the editor's writer and opens the
// gate. Called from l's goroutine only.
func (e *engine) endBatch(l *link) {
	b := &l.batch
	if !b.held {
		return
	}
	if testHookBatch != nil {
		testHookBatch(b.lines)
	}
	next, ok := e.out.publish(b.buf, l.kicks)
	if !ok {
		e.droppedEditor(b.lines) // (the writer is closing: the editor is gone)
	}
	b.held = false
	e.gate.Unlock()
	b.buf, b.lines = next[:0], 0
}

// lastFast is the table entry a link's goroutine found last, for the
// table it was found in.
type lastFast struct {
	table *fastTable
	fs    *fastSession
}

// lookup returns t's entry for the session id sid. A turn's updates are
// one session's, one after another: comparing sid with the last entry's
// key costs a fraction of hashing it. A table is never changed once
// published (the loop replaces it whole), so the same table holds the
// same entry. Called from the link's goroutine only.
func (l *link) lookup(t *fastTable, sid string) *fastSession {
	if l.last.table == t && l.last.fs.key == sid {
		return l.last.fs
	}
	fs := (*t)[sid]
	if fs != nil {
		l.last = lastFast{table: t, fs: fs}
	}
	return fs
}

// updateMember returns the update member of an update's params when they
// are exactly prefix ({"sessionId":…,"update":), the update and "}" as
// SDKs write them, which is what the store records of it.
func updateMember(params, prefix []byte) (_ []byte, ok bool) {
	if len(params) > len(prefix) && params[len(params)-1] == '}' && bytes.HasPrefix(params, prefix) {
		return params[len(prefix) : len(params)-1], true
	}
	return nil, false
}

// recordPassed gathers in lines the update the fast path passed, under
// the session's own id (a renamed session's agent id may be another
// session's in the store). The update member is the same in the agent's
// frame and in the renamed one; with secrets to scrub, what is kept is
// what the editor was sent (m), scrubbed: a secret the agent echoed is
// not kept either.
func (e *engine) recordPassed(lines *store.Lines, fs *fastSession, env *translate.Envelope, m *editorMsg) {
	if e.b.Redact == nil {
		if env.Plain { // a chunk of text, read as exactly that
			lines.TextChunk(fs.session, plainUpdate(env), env.UpdateKind)
			return
		}
		if update, ok := updateMember(env.Params, fs.agentPrefix); ok {
			lines.SessionUpdate(fs.session, update)
			return
		}
	}
	if update, ok := recordBody(m.joined(), fs.prefix); ok {
		lines.SessionUpdate(fs.session, update)
	} else {
		lines.Update(fs.session, update)
	}
}

// plainUpdate is the update member of a Plain envelope's params, which
// are exactly {"sessionId":"ID","update":UPDATE} (see translate.Envelope).
func plainUpdate(env *translate.Envelope) []byte {
	return env.Params[len(`{"sessionId":"`)+len(env.SessionID)+len(`","update":`) : len(env.Params)-1]
}

// sessionPrefix is how the params of s's updates start as relays write
// them: {"sessionId":…,"update":.
func sessionPrefix(s *session) []byte {
	if s.b.updPrefix == nil {
		s.b.updPrefix = []byte(`{"sessionId":` + mustJSON(s.id) + `,"update":`)
	}
	return s.b.updPrefix
}

// recordBody returns what the store records of an update the editor is
// sent as body: the params' update member (ok) when the params are exactly
// prefix, update and "}" as relays write them; else the params, or the
// whole notification when it is not framed as relays frame it (the store
// gives the params back on load either way; no parsing per update).
func recordBody(body, prefix []byte) (_ []byte, ok bool) {
	if bytes.HasPrefix(body, updateHead) && len(body) > len(updateHead) {
		body = body[len(updateHead) : len(body)-1]
	}
	if bytes.HasPrefix(body, prefix) && len(body) > len(prefix) && body[len(body)-1] == '}' {
		return body[len(prefix) : len(body)-1], true
	}
	return body, false
}

// aroundID returns what comes before and after the session id sid in
// frame, quotes excluded: the scanner read sid from frame as a string
// without escapes, so it shares frame's memory. ok is false when sid does
// not lie in frame as that string (the loop's path then renames it).
func aroundID(frame []byte, sid string) (head, tail []byte, ok bool) {
	if len(frame) == 0 || len(sid) == 0 {
		return nil, nil, false
	}
	off := int(uintptr(unsafe.Pointer(unsafe.StringData(sid))) - uintptr(unsafe.Pointer(&frame[0])))
	if off < 1 || off+len(sid)+1 > len(frame) || frame[off-1] != '"' || frame[off+len(sid)] != '"' {
		return nil, nil, false
	}
	return frame[: off-1 : off-1], frame[off+len(sid)+1:], true
}

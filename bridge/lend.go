package bridge

import (
	"sync"

	"github.com/acp-bridge/acp-bridge/translate"
)

// The lent sink: how a turn's stream of text chunks reaches the editor
// without a detour through the loop, on the path every other message takes.
//
// A turn streams thousands of session/update notifications that its
// translator passes on untouched (translate.UpdatePasser). Through the
// loop, each costs a hand-off from the link's reader to the loop and the
// loop's wake-up. So when the loop is about to wait, and exactly one turn
// runs, on a link whose translator promises to pass that session's plain
// chunks (translate.PlainChunk), the loop lends the link its sink: it
// sends the link's reader a lease by message (link.offers). While the
// reader holds the lease it handles those chunks itself, with the loop's
// own code (fromAgent, with the translator's call replaced by the output
// it promised): the same records in the store, the same hooks and taps,
// the same editor writer. The first frame that is not such a chunk gives
// the lease back, and goes to the loop through the inbox as every frame
// does.
//
// One rule keeps it one engine: the loop and a lease holder never run the
// engine's code at the same time. The loop takes the lease back (takeBack)
// before it handles anything it wakes for, and only lends while it waits;
// the holder runs the engine's code only under the lease's lock, which
// takeBack takes. Order holds because a lease is taken only by a reader
// whose every earlier frame the loop has handled (lease.seq), and given
// back before the reader puts its next frame in the inbox: the editor and
// the store get a link's frames in the order the agent sent them.
//
// Hooks and taps see every message either way; they are called by one
// goroutine at a time, the loop or the lease holder, never two at once.
type lease struct {
	e   *engine
	l   *link
	sid string // the session whose plain chunks pass
	// seq is the number of l's frames the loop had handled when it lent:
	// the reader takes the lease only if it has put no frame since.
	seq uint64

	mu     sync.Mutex
	over   bool // taken back, or given back; guarded by mu
	passed int  // the frames handled under the lease; guarded by mu
}

// lend lends the sink to the link of the one turn that runs, if its
// translator passes the turn's chunks and nothing else of the engine's
// state has a say in them: no v2 editor's front or relay, no session
// renamed by the store, no answer or message held for the store or for
// initialize, no cancelled turn being drained. Called by the loop before
// it waits.
func (e *engine) lend() {
	if e.lent != nil || e.b.noLend || e.v2.on || e.v2.front != nil ||
		len(e.dur.answers) > 0 || e.dur.aliasing() || len(e.held) > 0 {
		return
	}
	var turn *session
	for _, s := range e.sessions {
		if len(s.prompts) == 0 {
			continue
		}
		if turn != nil {
			return // two turns: their links would take the lease in turns
		}
		turn = s
	}
	if turn == nil || turn.draining {
		return
	}
	l := turn.link
	if !l.canLend || !l.up || l.down != nil || l.initRef != 0 {
		return
	}
	p, ok := l.tr.(translate.UpdatePasser)
	if !ok || !p.PassesUpdates(turn.id) {
		return
	}
	ls := &lease{e: e, l: l, sid: turn.id, seq: l.handled}
	select {
	case <-l.offers: // an earlier offer the reader never took
	default:
	}
	l.offers <- ls
	e.lent = ls
}

// takeBack ends the lease, if one is out, so that the loop may handle
// what woke it: once it returns, the holder runs none of the engine's
// code. What the holder gathered for the editor goes to the writer first.
func (e *engine) takeBack() {
	ls := e.lent
	if ls == nil {
		return
	}
	e.lent = nil
	ls.mu.Lock()
	ls.over = true
	passed := ls.passed
	ls.mu.Unlock()
	e.b.lentChunks.Add(int64(passed))
	e.flushEditor()
	e.batching, e.runs = false, false
}

// takeOffer returns the lease the loop offered l's reader, if any and if
// the loop had handled every frame the reader put in the inbox (put) when
// it lent: else a frame in the inbox could be overtaken. Called by the
// reader.
func (l *link) takeOffer(put uint64) *lease {
	select {
	case ls := <-l.offers:
		if ls.seq == put {
			return ls
		}
	default:
	}
	return nil
}

// pass handles ev under the lease when it is one of the chunks the lease
// is for, and reports whether it did. Otherwise the lease is given back:
// ev and every frame after it go through the loop. Called by the reader.
func (ls *lease) pass(ev *agentEvent) bool {
	if !ev.parsed || ev.perr != nil || !translate.PlainChunk(&ev.env) ||
		ev.env.SessionID != ls.sid || len(ev.frame) >= largeMessage {
		ls.mu.Lock()
		ls.over = true
		ls.mu.Unlock()
		return false
	}
	ls.mu.Lock()
	if ls.over {
		ls.mu.Unlock()
		return false
	}
	e := ls.e
	// What the editor is sent is copied into runs (the frame may lie in
	// the reader's buffer), handed to the writer when the agent pauses
	// (idle) or the loop takes the lease back.
	e.batching, e.runs = true, true
	e.fromAgent(ls.l, ev, true)
	ls.passed++
	ls.mu.Unlock()
	return true
}

// idle hands what the holder gathered to the editor's writer and the
// store: the agent has nothing more to read for now. Called by the
// reader before it waits for the agent.
func (ls *lease) idle() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.over {
		return
	}
	e := ls.e
	e.flushEditor()
	e.dur.flushRecords()
}

package bridge

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// StoryLog makes the logs tell what happened, from the engine's hooks
// alone (OnSession and Tap), so that the engine itself logs nothing per
// session or per message:
//
//   - at INFO, one line when a session opens, one when it closes or is
//     lost, one when a turn starts and one when it ends: session, stop
//     reason, duration, number of updates and their bytes. No message
//     bodies.
//   - at DEBUG, one line per message on either hop: direction, hop, link,
//     method, id, size, and for an answer the latency since its request.
//     No bodies either.
//   - at TRACE the engine's own lines carry the bodies (truncated to 2 KiB).
//
// Attach it with Attach before Serve, and call End once Serve has returned.
// Like every hook it is called by one goroutine at a time (the engine's
// loop, or the link reader the loop lent its sink to), so it needs no
// lock.
type StoryLog struct {
	Logger hclog.Logger
	// Now is the clock; nil means time.Now. Tests make it deterministic.
	Now func() time.Time

	sessions map[string]*sessionStory
	// last is the story of lastID: a stream's updates name one session,
	// and a map lookup per update is most of what counting them costs.
	lastID string
	last   *sessionStory
	// asked holds the requests awaiting an answer, by hop, link, the
	// direction of the request and its raw id.
	asked map[askKey]asked
}

// maxAsked bounds the requests remembered for their answers' latency.
const maxAsked = 10000

type sessionStory struct {
	opened  time.Time
	turns   int
	turn    time.Time // start of the turn in progress; zero between turns
	updates int
	bytes   int
}

type askKey struct {
	hop     Hop
	link    int
	inbound bool // the request's direction
	id      string
}

type asked struct {
	method string
	at     time.Time
}

// Attach chains the story's hooks after any already set on b.
func (s *StoryLog) Attach(b *Bridge) {
	if s.Logger == nil || !s.Logger.IsInfo() {
		return
	}
	b.AddOnSession(s.session)
	if s.Logger.IsDebug() {
		b.AddTap(s.tap)
	}
}

// AddTap sets Tap to call f after the Tap already set, if any: hooks
// composed by different parts of the program (logs, traces) chain rather
// than replace each other.
func (b *Bridge) AddTap(f func(TapEvent)) {
	if prev := b.Tap; prev != nil {
		b.Tap = func(ev TapEvent) { prev(ev); f(ev) }
		return
	}
	b.Tap = f
}

// AddOnNote is AddTap for OnNote.
func (b *Bridge) AddOnNote(f func(TapEvent)) {
	if prev := b.OnNote; prev != nil {
		b.OnNote = func(ev TapEvent) { prev(ev); f(ev) }
		return
	}
	b.OnNote = f
}

// AddOnSession is AddTap for OnSession.
func (b *Bridge) AddOnSession(f func(SessionEvent)) {
	if prev := b.OnSession; prev != nil {
		b.OnSession = func(ev SessionEvent) { prev(ev); f(ev) }
		return
	}
	b.OnSession = f
}

func (s *StoryLog) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *StoryLog) session(ev SessionEvent) {
	if ev.Kind == SessionUpdate && s.last != nil && ev.Session == s.lastID {
		s.last.updates++
		s.last.bytes += len(ev.Body)
		return
	}
	if s.sessions == nil {
		s.sessions = make(map[string]*sessionStory)
	}
	st := s.sessions[ev.Session]
	if st == nil && ev.Kind != SessionClosed && ev.Kind != SessionLost {
		st = &sessionStory{opened: s.now()}
		s.sessions[ev.Session] = st
	}
	s.lastID, s.last = ev.Session, st
	switch ev.Kind {
	case SessionOpened:
		s.Logger.Info("session opened", "session", ev.Session, "cwd", ev.Cwd)
	case SessionPrompt:
		st.turn, st.updates, st.bytes = s.now(), 0, 0
		// Prompts have no timeout: without this line a turn that never
		// ends leaves no trace in the log.
		s.Logger.Info("turn started", "session", ev.Session)
	case SessionUpdate:
		st.updates++
		st.bytes += len(ev.Body)
	case SessionTurnEnded:
		st.turns++
		args := []any{"session", ev.Session}
		if ev.Failed {
			args = append(args, "stop_reason", "error", "error", gjson.GetBytes(ev.Body, "message").Str)
		} else {
			args = append(args, "stop_reason", gjson.GetBytes(ev.Body, "stopReason").Str)
		}
		var d time.Duration
		if !st.turn.IsZero() {
			d = s.now().Sub(st.turn)
		}
		args = append(args, "duration", d.Round(time.Millisecond).String(), "updates", st.updates, "bytes", st.bytes)
		s.Logger.Info("turn ended", args...)
		st.turn, st.updates, st.bytes = time.Time{}, 0, 0
	case SessionClosed, SessionLost:
		args := []any{"session", ev.Session}
		if st != nil {
			args = append(args, "turns", st.turns, "duration", s.now().Sub(st.opened).Round(time.Millisecond).String())
		}
		if ev.Kind == SessionLost {
			args = append(args, "cause", gjson.GetBytes(ev.Body, "message").Str)
			s.Logger.Info("session lost", args...)
		} else {
			s.Logger.Info("session closed", args...)
		}
		delete(s.sessions, ev.Session)
		s.lastID, s.last = "", nil
	}
}

func (s *StoryLog) tap(ev TapEvent) {
	if ev.Hop == BridgeHop {
		s.Logger.Debug("bridge", "note", ev.Note, "detail", ev.Detail, "session", ev.Session)
		return
	}
	if s.asked == nil {
		s.asked = make(map[askKey]asked)
	}
	dir := "sent"
	if ev.Inbound {
		dir = "received"
	}
	args := []any{"hop", ev.Hop.String(), "dir", dir}
	if ev.Link != 0 {
		args = append(args, "link", ev.Link)
	}
	if ev.Session != "" {
		args = append(args, "session", ev.Session)
	}
	var method, id string
	isJSON := gjson.ValidBytes(ev.Message) && len(ev.Message) > 0 && ev.Message[0] == '{'
	if isJSON {
		res := gjson.GetManyBytes(ev.Message, "method", "id", "result", "error")
		method, id = res[0].Str, res[1].Raw
		switch {
		case method != "" && id != "":
			if len(s.asked) >= maxAsked {
				// Requests of a lost link are never answered; forget
				// them all rather than grow (only latencies are lost).
				clear(s.asked)
			}
			s.asked[askKey{ev.Hop, ev.Link, ev.Inbound, id}] = asked{method, s.now()}
			args = append(args, "kind", "request", "method", method, "id", id)
		case method != "":
			args = append(args, "kind", "notification", "method", method)
		case id != "" && (res[2].Exists() || res[3].Exists()):
			kind := "result"
			if res[3].Exists() {
				kind = "error"
			}
			args = append(args, "kind", kind, "id", id)
			// The request went the other way on the same hop and link.
			k := askKey{ev.Hop, ev.Link, !ev.Inbound, id}
			if a, ok := s.asked[k]; ok {
				delete(s.asked, k)
				args = append(args, "method", a.method, "latency", s.now().Sub(a.at).Round(time.Microsecond).String())
			}
		default:
			args = append(args, "kind", "frame")
		}
	} else {
		args = append(args, "kind", "frame")
	}
	args = append(args, "size", len(ev.Message))
	s.Logger.Debug("message", args...)
}

// End logs the end of every session still open when the bridge stopped
// (the editor closed its input, a signal), with reason. Call it after Serve
// has returned, when no hook runs any more.
func (s *StoryLog) End(reason string) {
	if s.Logger == nil {
		return
	}
	for id, st := range s.sessions {
		s.Logger.Info("session ended", "session", id, "turns", st.turns,
			"duration", s.now().Sub(st.opened).Round(time.Millisecond).String(), "reason", reason)
	}
	s.sessions = nil
	s.lastID, s.last = "", nil
}

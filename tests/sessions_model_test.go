package tests

// TestSessionsModel holds durable sessions (issue 25) to their promises
// with sequences of editor operations over up to three bridge processes
// ("windows") sharing one state directory, each step checked against a
// model of what the editor was promised:
//
//	P1 every request gets exactly one answer; a bridge exits only after its
//	   stdin closes, then with 0; stdout is JSON-RPC (the harness checks
//	   every line).
//	P2 session/new never answers an id handed out before on the state dir.
//	P3 an id no bridge opened leaves no trace (never listed).
//	P4 session/list shows exactly the live sessions, with their cwd and the
//	   title of their first accepted prompt.
//	P5 session/load replays exactly that session's conversation before its
//	   answer; prompts then work and are in the next load.
//	P6 load, resume and delete of a session another live window has open
//	   fail saying so, and change nothing.
//	P7 after kill -9 every answered turn survives; the sessions load elsewhere.
//	P8 close then load in the same window re-attaches.
//	K  (keep mode: an agent that keeps its sessions) a session re-attaches
//	   with the agent's own session/resume of the agent's own id, never a
//	   new agent session.
//
// Fixed sequences reproduce the bugs of issue 25 (case-N); seeded random
// sequences (seeds 1…3, 30 steps, by default) look for more of their
// class. A failure prints the seed, the steps and the mismatch; replay it
// with
//
//	go test -race -run 'TestSessionsModel/seed-S$' ./tests/ -sessions.seed=S -sessions.steps=M
//
// A longer search: -sessions.seeds N -sessions.steps M; -sessions.without
// leaves operations out (to look past a bug already known) and
// -sessions.mode fixes the agent's mode (strict, lenient, keep).
//
// Where the promises are silent the model is loose: a prompt in a window
// on a session another window has open may get any answer (only if it
// succeeded may it show in that session's replay), a cancelled turn
// replays its prompt and any prefix of what it streamed, and a turn cut
// by a kill or an exit may be there like a cancelled one or not at all.

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

var (
	modelSeed  = flag.Uint64("sessions.seed", 0, "TestSessionsModel: run the random sequence of this seed only")
	modelSeeds = flag.Int("sessions.seeds", 3, "TestSessionsModel: how many random sequences (seeds 1…N)")
	modelSteps = flag.Int("sessions.steps", 30, "TestSessionsModel: steps in each random sequence")
	// Exploring past bugs already known: the random sequences can leave
	// out operations (see next for their names) and fix the agent's mode.
	modelWithout = flag.String("sessions.without", "", "TestSessionsModel: comma-separated operations the random sequences leave out, e.g. prompt-unknown,pipeline")
	modelMode    = flag.String("sessions.mode", "", "TestSessionsModel: the random sequences' agent mode (strict, lenient or keep); default: picked by the seed")
)

func TestSessionsModel(t *testing.T) {
	t.Parallel()
	for _, c := range modelCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newModelRun(t, c.mode, 0)
			for _, o := range c.ops {
				r.do(o)
			}
			r.finish()
		})
	}
	seeds := make([]uint64, 0, *modelSeeds)
	if *modelSeed != 0 {
		seeds = append(seeds, *modelSeed)
	} else {
		for i := range *modelSeeds {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 25))
			mode := []string{"strict", "strict", "lenient", "keep"}[rng.IntN(4)]
			if *modelMode != "" {
				mode = *modelMode
			}
			r := newModelRun(t, mode, seed)
			r.rng = rng
			for i := range *modelSteps {
				r.do(r.next())
				if i%8 == 7 {
					r.do(mop{kind: "verify"})
				}
			}
			r.finish()
		})
	}
}

// mop is one operation of a sequence. Windows are numbered in the order
// they were opened, sessions in the order session/new created them.
type mop struct {
	kind string
	w    int    // window
	s    int    // session
	n    int    // chunks streamed; cwd for "new"
	id   string // an id no bridge handed out (the *-unknown kinds)
}

func (o mop) String() string {
	switch o.kind {
	case "open", "close", "kill", "list", "release", "cancel":
		return fmt.Sprintf("%s w%d", o.kind, o.w)
	case "verify":
		return "verify"
	case "new":
		return fmt.Sprintf("new w%d cwd%d", o.w, o.n)
	case "prompt", "prompt-foreign", "pipeline":
		return fmt.Sprintf("%s w%d S%d stream %d", o.kind, o.w, o.s, o.n)
	case "prompt-unknown":
		return fmt.Sprintf("%s w%d %q stream %d", o.kind, o.w, o.id, o.n)
	case "load-unknown", "resume-unknown", "close-unknown", "delete-unknown":
		return fmt.Sprintf("%s w%d %q", o.kind, o.w, o.id)
	}
	return fmt.Sprintf("%s w%d S%d", o.kind, o.w, o.s)
}

// The fixed sequences: each bug of issue 25, on its own.
var modelCases = []struct {
	name string
	mode string
	ops  []mop
}{
	// 1. A prompt on an id no bridge opened (the agent answers -32002),
	// then load and resume of it: the bridge must answer, not crash.
	{"case-1-unknown-id-then-load", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 0, n: 2},
		{kind: "prompt-unknown", w: 0, id: "sess-9", n: 1},
		{kind: "load-unknown", w: 0, id: "sess-9"},
		{kind: "resume-unknown", w: 0, id: "sess-9"},
		{kind: "prompt", w: 0, s: 0, n: 1},
		{kind: "open", w: 1},
		{kind: "prompt-unknown", w: 1, id: "ghost-1", n: 1},
		{kind: "resume-unknown", w: 1, id: "ghost-1"},
		{kind: "load-unknown", w: 1, id: "ghost-1"},
		{kind: "delete-unknown", w: 1, id: "ghost-1"},
		{kind: "verify"},
	}},
	// 2. That rejected prompt must leave no phantom session in the list.
	{"case-2-no-phantom", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0, n: 1}, {kind: "prompt", w: 0, s: 0, n: 1},
		{kind: "prompt-unknown", w: 0, id: "ghost-2", n: 1},
		{kind: "close-unknown", w: 0, id: "ghost-3"},
		{kind: "list", w: 0},
		{kind: "close", w: 0}, {kind: "open", w: 1}, {kind: "list", w: 1},
	}},
	// 3. After a restart, a loaded session re-attaches as the agent's new
	// sess-1; the next session/new must not answer an id already handed out.
	{"case-3-ids-after-restart", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 1, n: 2},
		{kind: "close", w: 0},
		{kind: "open", w: 1}, {kind: "load", w: 1, s: 1}, {kind: "new", w: 1},
		{kind: "prompt", w: 1, s: 2, n: 1}, {kind: "prompt", w: 1, s: 1, n: 3},
		{kind: "verify"},
	}},
	// 4. Two windows on one state dir.
	{"case-4-two-windows-new", "strict", []mop{
		{kind: "open", w: 0}, {kind: "open", w: 1},
		{kind: "new", w: 0, n: 0}, {kind: "prompt", w: 0, s: 0, n: 2},
		{kind: "new", w: 1, n: 1}, {kind: "prompt", w: 1, s: 1, n: 3},
		{kind: "list", w: 0}, {kind: "close", w: 1}, {kind: "load", w: 0, s: 0},
		{kind: "verify"},
	}},
	{"case-4-load-open-elsewhere", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 0, n: 2},
		{kind: "open", w: 1}, {kind: "load", w: 1, s: 0}, {kind: "resume", w: 1, s: 0},
		{kind: "prompt", w: 0, s: 0, n: 1}, {kind: "verify"},
	}},
	{"case-4-delete-open-elsewhere", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 0, n: 2},
		{kind: "open", w: 1}, {kind: "delete", w: 1, s: 0},
		{kind: "prompt", w: 0, s: 0, n: 1}, {kind: "close", w: 0}, {kind: "verify"},
	}},
	{"case-4-delete-during-turn", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 0, n: 1},
		{kind: "hold", w: 0, s: 0}, {kind: "delete", w: 0, s: 0}, {kind: "release", w: 0},
		{kind: "list", w: 0}, {kind: "open", w: 1}, {kind: "list", w: 1}, {kind: "load", w: 1, s: 0},
	}},
	// 5 (a full disk) is not reachable through the binary; the store's
	// tests inject the fault.
	//
	// 6. An agent that keeps its sessions is resumed with its own id
	// across bridge processes, never given a new session.
	{"case-6-resume-keeps-agent-session", "keep", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 1, n: 2},
		{kind: "close", w: 0},
		{kind: "open", w: 1}, {kind: "resume", w: 1, s: 1}, {kind: "prompt", w: 1, s: 1, n: 1},
		{kind: "new", w: 1}, {kind: "close", w: 1},
		{kind: "open", w: 2}, {kind: "load", w: 2, s: 1}, {kind: "prompt", w: 2, s: 1, n: 1},
		{kind: "resume", w: 2, s: 2}, {kind: "prompt", w: 2, s: 2, n: 1},
		{kind: "verify"},
	}},
	// P7: kill -9 in the middle of a turn.
	{"case-7-kill-mid-turn", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 0, n: 3},
		{kind: "hold", w: 0, s: 0}, {kind: "kill", w: 0},
		{kind: "open", w: 1}, {kind: "load", w: 1, s: 0}, {kind: "prompt", w: 1, s: 0, n: 2},
		{kind: "kill", w: 1}, {kind: "verify"},
	}},
	// P7: kill -9 right after a turn was answered: the turn survives.
	{"case-7-kill-after-answer", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0, n: 2}, {kind: "prompt", w: 0, s: 0, n: 3}, {kind: "kill", w: 0},
		{kind: "open", w: 1}, {kind: "load", w: 1, s: 0}, {kind: "verify"},
	}},
	// P8: close, then load again in the same window; and the pipelined load.
	{"case-8-close-then-load", "strict", []mop{
		{kind: "open", w: 0}, {kind: "new", w: 0}, {kind: "prompt", w: 0, s: 0, n: 2},
		{kind: "close-session", w: 0, s: 0}, {kind: "load", w: 0, s: 0}, {kind: "prompt", w: 0, s: 0, n: 1},
		{kind: "close-session", w: 0, s: 0}, {kind: "pipeline", w: 0, s: 0, n: 2},
		{kind: "hold", w: 0, s: 0}, {kind: "cancel", w: 0}, {kind: "prompt", w: 0, s: 0, n: 1},
		{kind: "verify"},
	}},
}

// --- the model ------------------------------------------------------------

// turn states.
const (
	turnPending   = iota // sent, not answered yet
	turnDone             // answered end_turn: replayed exactly
	turnCancelled        // answered cancelled: the prompt and a prefix of its chunks
	turnUnsure           // never answered (kill, exit) or answered by a closed session: maybe absent
)

type mTurn struct {
	text   string
	chunks []string
	state  int
}

type mSession struct {
	idx   int
	id    string
	cwd   string
	turns []*mTurn
	// title is the first line of the first accepted prompt; maybe are
	// first lines of earlier prompts whose fate is unknown.
	title string
	maybe []string
	// open is the window that has the session open, nil for none;
	// creator the one whose session/new made it.
	open, creator *mWindow
	deleted       bool
	// fragile: created in a window killed before any of its turns was
	// answered; the kill may have beaten its first record to the disk
	// (P7 promises turns, not sessions): it may be gone.
	fragile bool
}

type mHeld struct {
	s    *mSession
	turn *mTurn
	id   string
	key  string
	from int
}

type mWindow struct {
	n     int
	b     *Bridge
	alive bool
	next  int
	sent  map[string]string // raw id → method
	resp  map[string]Line
	seen  int             // stdout lines looked at
	named map[string]bool // session ids this window's requests named
	// busy counts the prompts, loads and resumes of a session awaiting
	// their answer (busyID: the session of each); only then may the
	// session's conversation stream.
	busy   map[string]int
	busyID map[string]string
	held   *mHeld
}

type modelRun struct {
	t    *testing.T
	seed uint64
	mode string
	rng  *rand.Rand

	state, agentDir string
	cwds            []string
	wins            []*mWindow
	sessions        []*mSession
	handed          map[string]bool // every id session/new answered
	probes          []string        // unknown ids used
	newOK           int             // session/new answered with an id
	steps           []string
	turnN           int
}

func newModelRun(t *testing.T, mode string, seed uint64) *modelRun {
	return &modelRun{t: t, seed: seed, mode: mode, state: t.TempDir(), agentDir: t.TempDir(),
		cwds: []string{t.TempDir(), t.TempDir(), t.TempDir()}, handed: map[string]bool{}}
}

// fail ends the sequence with what was promised and what happened.
func (r *modelRun) fail(format string, args ...any) {
	r.t.Helper()
	var b strings.Builder
	for i, s := range r.steps {
		fmt.Fprintf(&b, "\t%2d %s\n", i, s)
	}
	how := fmt.Sprintf("fixed sequence %s", r.t.Name())
	if r.seed != 0 {
		extra := ""
		if *modelWithout != "" {
			extra += " -sessions.without=" + *modelWithout
		}
		if *modelMode != "" {
			extra += " -sessions.mode=" + *modelMode
		}
		how = fmt.Sprintf("seed %d (replay: go test -race -run 'TestSessionsModel/seed-%d$' ./tests/ -sessions.seed=%d -sessions.steps=%d%s)",
			r.seed, r.seed, r.seed, *modelSteps, extra)
	}
	r.t.Fatalf("%s, agent mode %s: step %d %s:\n%s\nsteps:\n%s", how, r.mode, len(r.steps)-1, r.steps[len(r.steps)-1], fmt.Sprintf(format, args...), b.String())
}

func (r *modelRun) win(n int) *mWindow {
	if n >= len(r.wins) || !r.wins[n].alive {
		r.t.Fatalf("bad sequence: window w%d is not open", n)
	}
	return r.wins[n]
}

func (r *modelRun) sess(i int) *mSession {
	if i >= len(r.sessions) {
		r.t.Fatalf("bad sequence: no session S%d", i)
	}
	return r.sessions[i]
}

func (r *modelRun) alive() []*mWindow {
	var out []*mWindow
	for _, w := range r.wins {
		if w.alive {
			out = append(out, w)
		}
	}
	return out
}

// openElsewhere reports the live window other than w that has s open.
func (r *modelRun) openElsewhere(s *mSession, w *mWindow) *mWindow {
	if s.open != nil && s.open != w && s.open.alive {
		return s.open
	}
	return nil
}

// --- the windows ------------------------------------------------------------

// send writes a request and returns its raw id and the stdout length
// before it: no line before that can belong to it.
func (r *modelRun) send(w *mWindow, method, params string) (id string, from int) {
	r.t.Helper()
	w.next++
	id = fmt.Sprintf(`"w%d-%d"`, w.n, w.next)
	w.sent[id] = method
	switch method {
	case "session/prompt", "session/load", "session/resume":
		sid := gjson.Get(params, "sessionId").Str
		w.busy[sid]++
		w.busyID[id] = sid
	}
	from = w.b.Out.Len()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
	if _, err := w.b.In.Write([]byte(line + "\n")); err != nil {
		r.fail("P1: writing %s to window w%d: %v (the bridge exited?)", method, w.n, err)
	}
	return id, from
}

func (r *modelRun) notify(w *mWindow, method, params string) {
	line := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s}`, method, params)
	if _, err := w.b.In.Write([]byte(line + "\n")); err != nil {
		r.fail("P1: writing %s to window w%d: %v", method, w.n, err)
	}
}

// look checks stdout line i of w as it is first seen.
func (r *modelRun) look(w *mWindow, l Line) {
	r.t.Helper()
	if l.IsResponse() {
		id := l.ID()
		if _, ok := w.sent[id]; !ok {
			r.fail("P1: window w%d answered id %s, which no request carried: %s", w.n, id, l)
		}
		if prev, ok := w.resp[id]; ok {
			r.fail("P1: window w%d answered request %s twice:\n\t%s\n\t%s", w.n, id, prev, l)
		}
		w.resp[id] = l
		if sid, ok := w.busyID[id]; ok {
			w.busy[sid]--
		}
		return
	}
	kind := l.Get("params.update.sessionUpdate").Str
	if l.Method() == "session/update" && (kind == "agent_message_chunk" || kind == "user_message_chunk") {
		sid := l.Get("params.sessionId").Str
		for _, s := range r.sessions {
			switch {
			case s.id != sid:
			case !w.named[sid] && r.openElsewhere(s, w) != nil:
				r.fail("P5: window w%d was sent an update for S%d %s, which it never named and window w%d has open: %s",
					w.n, s.idx, sid, s.open.n, l)
			case s.open == w && w.busy[sid] == 0:
				r.fail("P5: window w%d was sent an update for S%d %s while no prompt or load of it was running: a word of another conversation? %s",
					w.n, s.idx, sid, l)
			}
		}
	}
}

// await waits for the answer to id.
func (r *modelRun) await(w *mWindow, id string) Line {
	r.t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		if l, ok := w.resp[id]; ok {
			return l
		}
		l, ok := w.b.Out.at(w.seen, 50*time.Millisecond)
		if ok {
			w.seen++
			r.look(w, l)
			continue
		}
		select {
		case <-w.b.Exited():
			if w.b.Out.Len() > w.seen {
				continue // lines it wrote before it went
			}
			code, _ := w.b.WaitExit(WaitTimeout) // it has exited: at once
			r.fail("P1: window w%d exited (code %d) without answering %s %s; stderr ends:\n%s", w.n, code, w.sent[id], id, tail(w.b.Stderr(), 3000))
		default:
		}
		if time.Now().After(deadline) {
			r.fail("P1: window w%d did not answer %s %s within %v", w.n, w.sent[id], id, WaitTimeout)
		}
	}
}

// waitChunk waits for an agent_message_chunk text on sid.
func (r *modelRun) waitChunk(w *mWindow, sid, text string, from int) {
	r.t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for i := from; ; i++ {
		l, ok := w.b.Out.at(i, time.Until(deadline))
		if !ok {
			r.fail("window w%d: no chunk %q for %s within %v", w.n, text, sid, WaitTimeout)
		}
		if i >= w.seen {
			w.seen = i + 1
			r.look(w, l)
		}
		if l.Method() == "session/update" && l.Get("params.sessionId").Str == sid && l.Get("params.update.content.text").Str == text {
			return
		}
	}
}

// items returns the user and agent message chunks for sid on w's stdout
// in lines [from, to), as "user:TEXT" and "agent:TEXT".
func items(w *mWindow, from, to int, sid string) []string {
	var out []string
	lines := w.b.Out.Lines()
	to = min(to, len(lines))
	for _, l := range lines[min(from, to):to] {
		if l.Method() != "session/update" || l.Get("params.sessionId").Str != sid {
			continue
		}
		u := l.Get("params.update")
		switch u.Get("sessionUpdate").Str {
		case "user_message_chunk":
			out = append(out, "user:"+u.Get("content.text").Str)
		case "agent_message_chunk":
			out = append(out, "agent:"+u.Get("content.text").Str)
		}
	}
	return out
}

// settle checks, after every step, that no live window exited and that
// what stdout holds so far obeys the rules.
func (r *modelRun) settle() {
	r.t.Helper()
	for _, w := range r.alive() {
		select {
		case <-w.b.Exited():
			code, _ := w.b.WaitExit(WaitTimeout) // it has exited: at once
			r.fail("P1: window w%d exited (code %d) before its stdin closed; stderr ends:\n%s", w.n, code, tail(w.b.Stderr(), 3000))
		default:
		}
		for n := w.b.Out.Len(); w.seen < n; w.seen++ {
			l, _ := w.b.Out.at(w.seen, 0)
			r.look(w, l)
		}
		if p := w.b.Out.Problems(); len(p) > 0 {
			r.fail("P1: window w%d's stdout broke the wire rules: %s", w.n, strings.Join(p, "\n"))
		}
	}
	if r.mode == "keep" {
		news := 0
		for _, ev := range modelEvents(r.agentDir) {
			kind, id, _ := strings.Cut(ev, " ")
			switch kind {
			case "new":
				news++
			case "resume-unknown":
				if !slices.Contains(r.probes, id) {
					r.fail("K: the bridge asked the agent to resume %q, an id the agent never handed out: it lost the agent's own session id (agent events %q)", id, modelEvents(r.agentDir))
				}
			}
		}
		if news != r.newOK {
			r.fail("K: the agent was asked for %d new sessions, the editor for %d: a session the agent keeps was re-attached as a new agent session instead of resumed (agent events %q)",
				news, r.newOK, modelEvents(r.agentDir))
		}
	}
}

// --- operations ---------------------------------------------------------------

func (r *modelRun) do(o mop) {
	r.t.Helper()
	r.steps = append(r.steps, o.String())
	switch o.kind {
	case "open":
		r.open(o.w)
	case "close":
		r.closeWindow(r.win(o.w))
	case "kill":
		r.kill(r.win(o.w))
	case "new":
		r.newSession(r.win(o.w), o.n)
	case "prompt":
		r.prompt(r.win(o.w), r.sess(o.s), o.n)
	case "prompt-foreign":
		r.promptForeign(r.win(o.w), r.sess(o.s), o.n)
	case "prompt-unknown":
		r.promptUnknown(r.win(o.w), o.id, o.n)
	case "hold":
		r.hold(r.win(o.w), r.sess(o.s))
	case "release", "cancel":
		r.endHeld(r.win(o.w), o.kind)
	case "load", "resume":
		r.open1(r.win(o.w), r.sess(o.s), "session/"+o.kind, false)
	case "pipeline":
		r.open1(r.win(o.w), r.sess(o.s), "session/load", true, o.n)
	case "load-unknown", "resume-unknown", "close-unknown", "delete-unknown":
		r.unknown(r.win(o.w), "session/"+strings.TrimSuffix(o.kind, "-unknown"), o.id)
	case "close-session":
		r.closeSession(r.win(o.w), r.sess(o.s))
	case "delete":
		r.deleteSession(r.win(o.w), r.sess(o.s))
	case "list":
		r.list(r.win(o.w))
	case "verify":
		r.verify()
	default:
		r.t.Fatalf("bad sequence: unknown operation %q", o.kind)
	}
	r.settle()
}

func (r *modelRun) open(n int) {
	if n != len(r.wins) {
		r.t.Fatalf("bad sequence: windows open in order; next is w%d, not w%d", len(r.wins), n)
	}
	agent := ChildTransport("model").Start(r.t)
	env := append(agent.Env, envModelMode+"="+r.mode, envModelDir+"="+r.agentDir)
	b := StartBridge(r.t, append([]string{"--state-dir", r.state}, agent.Args...), env, nil)
	w := &mWindow{n: n, b: b, alive: true, sent: map[string]string{}, resp: map[string]Line{}, named: map[string]bool{},
		busy: map[string]int{}, busyID: map[string]string{}}
	r.wins = append(r.wins, w)
	id, _ := r.send(w, "initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}`)
	if l := r.await(w, id); !l.Get("result.agentCapabilities.loadSession").Bool() {
		r.fail("initialize = %s, want loadSession advertised (sessions are on)", l)
	}
}

// gone settles the model after a window ended: its sessions are open
// nowhere; a held turn's fate is unknown.
func (r *modelRun) gone(w *mWindow, killed bool) {
	w.alive = false
	if w.held != nil {
		w.held.turn.state = turnUnsure
		w.held = nil
	}
	for _, s := range r.sessions {
		if s.open == w {
			s.open = nil
		}
		// P7 promises answered turns; a session without one, made by the
		// killed window, may not have reached the disk.
		if killed && s.creator == w && !slices.ContainsFunc(s.turns, func(t *mTurn) bool { return t.state == turnDone || t.state == turnCancelled }) {
			s.fragile = true
		}
	}
}

func (r *modelRun) closeWindow(w *mWindow) {
	w.b.In.Close()
	code, ok := w.b.WaitExit(WaitTimeout)
	if !ok {
		r.fail("P1: window w%d still running %v after its stdin closed", w.n, WaitTimeout)
	}
	if code != 0 {
		r.fail("P1: window w%d exited with %d after its stdin closed, want 0; stderr ends:\n%s", w.n, code, tail(w.b.Stderr(), 3000))
	}
	waitUntil(r.t, WaitTimeout, "the bridge's stdout to close", w.b.Out.EOF)
	for n := w.b.Out.Len(); w.seen < n; w.seen++ {
		l, _ := w.b.Out.at(w.seen, 0)
		r.look(w, l)
	}
	for id, m := range w.sent {
		if _, ok := w.resp[id]; !ok {
			r.fail("P1: window w%d exited without answering %s %s", w.n, m, id)
		}
	}
	r.gone(w, false)
}

func (r *modelRun) kill(w *mWindow) {
	w.b.Out.AllowCutLastLine()
	if err := killPID(w.b.Pid()); err != nil {
		r.fail("kill -9 window w%d: %v", w.n, err)
	}
	if _, ok := w.b.WaitExit(WaitTimeout); !ok {
		r.fail("window w%d survived kill -9", w.n)
	}
	r.gone(w, true)
}

func (r *modelRun) newSession(w *mWindow, cwd int) {
	id, _ := r.send(w, "session/new", fmt.Sprintf(`{"cwd":%q,"mcpServers":[]}`, r.cwds[cwd]))
	l := r.await(w, id)
	sid := l.Get("result.sessionId").Str
	if sid == "" {
		r.fail("session/new = %s, want a session id", l)
	}
	if r.handed[sid] {
		owner := slices.IndexFunc(r.sessions, func(s *mSession) bool { return s.id == sid })
		r.fail("P2: session/new in window w%d answered %q, an id already handed out on this state dir (S%d)", w.n, sid, owner)
	}
	r.handed[sid] = true
	r.newOK++
	w.named[sid] = true
	r.sessions = append(r.sessions, &mSession{idx: len(r.sessions), id: sid, cwd: r.cwds[cwd], open: w, creator: w})
}

func (r *modelRun) promptText(cmd string) string {
	r.turnN++
	return fmt.Sprintf("%s t%d\nthe second line of turn %d", cmd, r.turnN, r.turnN)
}

func promptParams(sid, text string) string {
	return fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":%q}]}`, sid, text)
}

func chunks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("chunk-%04d", i)
	}
	return out
}

func firstLine(text string) string { t, _, _ := strings.Cut(text, "\n"); return t }

// accepted notes a prompt answered with a result: its first line titles a
// session that had none.
func (s *mSession) accepted(text string) {
	if s.title == "" {
		s.title = firstLine(text)
	}
}

func (r *modelRun) prompt(w *mWindow, s *mSession, n int) {
	if s.open != w || w.held != nil && w.held.s == s {
		r.t.Fatalf("bad sequence: prompt on S%d, which window w%d does not have open and idle", s.idx, w.n)
	}
	text := r.promptText(fmt.Sprintf("stream %d", n))
	if s.title == "" {
		s.maybe = append(s.maybe, firstLine(text))
	}
	id, from := r.send(w, "session/prompt", promptParams(s.id, text))
	r.checkTurn(w, s, id, from, text, chunks(n))
}

// checkTurn awaits a prompt on a session w has open and checks its answer
// and its stream.
func (r *modelRun) checkTurn(w *mWindow, s *mSession, id string, from int, text string, want []string) {
	r.t.Helper()
	turn := &mTurn{text: text, chunks: want}
	s.turns = append(s.turns, turn)
	l := r.await(w, id)
	if l.Get("result.stopReason").Str != "end_turn" {
		turn.state = turnUnsure
		r.fail("P5: a prompt on S%d %s, open in window w%d, = %s, want end_turn", s.idx, s.id, w.n, l)
	}
	turn.state = turnDone
	s.accepted(text)
	got := items(w, from, l.N, s.id)
	if !slices.Equal(got, prefixed("agent:", want)) {
		r.fail("P5: the prompt on S%d %s streamed %q, want %q", s.idx, s.id, got, prefixed("agent:", want))
	}
}

func prefixed(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}

// promptForeign prompts, in w, a session another window has open. Nothing
// says what the answer is; it must not become part of the other window's
// conversation unless the bridge accepted it (then the model cannot tell
// where, and lets the turn be there or not).
func (r *modelRun) promptForeign(w *mWindow, s *mSession, n int) {
	text := r.promptText(fmt.Sprintf("stream %d", n))
	w.named[s.id] = true
	id, _ := r.send(w, "session/prompt", promptParams(s.id, text))
	if l := r.await(w, id); l.Get("result").Exists() {
		s.turns = append(s.turns, &mTurn{text: text, chunks: chunks(n), state: turnUnsure})
		if s.title == "" {
			s.maybe = append(s.maybe, firstLine(text))
		}
	}
}

// probe notes an id the sequence uses as unknown.
func (r *modelRun) probe(id string) {
	if r.handed[id] {
		r.t.Fatalf("bad sequence: %q was handed out, it is not unknown", id)
	}
	if !slices.Contains(r.probes, id) {
		r.probes = append(r.probes, id)
	}
}

func (r *modelRun) promptUnknown(w *mWindow, sid string, n int) {
	r.probe(sid)
	w.named[sid] = true
	id, _ := r.send(w, "session/prompt", promptParams(sid, r.promptText(fmt.Sprintf("stream %d", n))))
	r.await(w, id) // any answer (P3); the listing shows no trace
}

// unknown sends load, resume, close or delete of an id no bridge opened:
// any answer, nothing replayed, no trace.
func (r *modelRun) unknown(w *mWindow, method, sid string) {
	r.probe(sid)
	w.named[sid] = true
	params := fmt.Sprintf(`{"sessionId":%q}`, sid)
	if method == "session/load" || method == "session/resume" {
		params = fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, r.cwds[0])
	}
	id, from := r.send(w, method, params)
	l := r.await(w, id)
	if got := items(w, from, l.N, sid); len(got) > 0 {
		r.fail("P3: %s of %q, an id no bridge opened, replayed %q", method, sid, got)
	}
}

func (r *modelRun) hold(w *mWindow, s *mSession) {
	if s.open != w || w.held != nil {
		r.t.Fatalf("bad sequence: hold on S%d in window w%d", s.idx, w.n)
	}
	r.turnN++
	key := fmt.Sprintf("k%d", r.turnN)
	text := fmt.Sprintf("hold %s t%d\nthe second line of turn %d", key, r.turnN, r.turnN)
	if s.title == "" {
		s.maybe = append(s.maybe, firstLine(text))
	}
	id, from := r.send(w, "session/prompt", promptParams(s.id, text))
	turn := &mTurn{text: text, chunks: []string{"holding:" + key}, state: turnPending}
	s.turns = append(s.turns, turn)
	w.held = &mHeld{s: s, turn: turn, id: id, key: key, from: from}
	r.waitChunk(w, s.id, "holding:"+key, from)
}

// endHeld ends w's held turn: released (end_turn) or cancelled.
func (r *modelRun) endHeld(w *mWindow, how string) {
	h := w.held
	if h == nil {
		r.t.Fatalf("bad sequence: %s with no held turn in window w%d", how, w.n)
	}
	w.held = nil
	s := h.s
	live := s.open == w && !s.deleted // else the session went while the turn ran
	if how == "release" {
		rid, _ := r.send(w, "_test/release", fmt.Sprintf(`{"key":%q}`, h.key))
		r.await(w, rid)
	} else {
		r.notify(w, "session/cancel", fmt.Sprintf(`{"sessionId":%q}`, s.id))
	}
	l := r.await(w, h.id)
	if !live {
		h.turn.state = turnUnsure
		return
	}
	stop := l.Get("result.stopReason").Str
	switch {
	case how == "release" && stop == "end_turn":
		h.turn.chunks = append(h.turn.chunks, "released:"+h.key)
		h.turn.state = turnDone
		if got, want := items(w, h.from, l.N, s.id), prefixed("agent:", h.turn.chunks); !slices.Equal(got, want) {
			r.fail("P5: the released turn on S%d streamed %q, want %q", s.idx, got, want)
		}
	case how == "cancel" && stop != "":
		h.turn.state = turnCancelled
	default:
		h.turn.state = turnUnsure
		r.fail("P5: the held turn on S%d, %s, was answered %s", s.idx, how, l)
	}
	s.accepted(h.turn.text)
}

// anotherProcess is what P6 wants an error for a session open elsewhere
// to say.
func anotherProcess(l Line) bool {
	m := strings.ToLower(l.Get("error.message").Str)
	return strings.Contains(m, "another acp-bridge process") && strings.Contains(m, "open")
}

// open1 serves load, resume and the pipelined load+prompt of session s in
// window w.
func (r *modelRun) open1(w *mWindow, s *mSession, method string, pipeline bool, n ...int) {
	r.t.Helper()
	w.named[s.id] = true
	id, from := r.send(w, method, fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, s.id, s.cwd))
	var pid, text string
	if pipeline {
		if s.deleted || r.openElsewhere(s, w) != nil || w.held != nil && w.held.s == s {
			r.t.Fatalf("bad sequence: pipelined load of S%d in window w%d", s.idx, w.n)
		}
		text = r.promptText(fmt.Sprintf("stream %d", n[0]))
		if s.title == "" {
			s.maybe = append(s.maybe, firstLine(text))
		}
		pid, _ = r.send(w, "session/prompt", promptParams(s.id, text))
	}
	l := r.await(w, id)
	replayed := items(w, from, l.N, s.id)
	if other := r.openElsewhere(s, w); other != nil {
		if !l.Get("error").Exists() || !anotherProcess(l) {
			r.fail("P6: %s of S%d %s in window w%d while window w%d has it open = %s, want an error saying it is open in another acp-bridge process",
				method, s.idx, s.id, w.n, other.n, l)
		}
		if len(replayed) > 0 {
			r.fail("P6: the refused %s of S%d replayed %q", method, s.idx, replayed)
		}
		return
	}
	if s.deleted {
		if !l.Get("error").Exists() || len(replayed) > 0 {
			r.fail("P6: %s of S%d %s, deleted, = %s after replaying %q; want an error and nothing replayed", method, s.idx, s.id, l, replayed)
		}
		return
	}
	if s.fragile && (l.Get("error").Exists() || len(replayed) == 0) {
		// The kill may have beaten the session's first record to the
		// disk: gone, or empty.
		s.fragile = false
		if l.Get("error").Exists() {
			s.deleted = true
			return
		}
	}
	if !l.Get("result").IsObject() {
		r.fail("P5: %s of S%d %s (recorded, open in no other window) = %s, want a result", method, s.idx, s.id, l)
	}
	s.fragile = false
	s.open = w
	if method == "session/resume" {
		if len(replayed) > 0 {
			r.fail("resume of S%d replayed %q; resume does not replay (docs/sessions.md)", s.idx, replayed)
		}
	} else if !matchReplay(replayed, s.turns) {
		r.fail("P5: load of S%d %s replayed\n\t%q\nwant the session's conversation:\n\t%s", s.idx, s.id, replayed, describe(s.turns))
	}
	if pipeline {
		r.checkTurn(w, s, pid, l.N+1, text, chunks(n[0]))
	}
}

func describe(turns []*mTurn) string {
	var b strings.Builder
	for _, t := range turns {
		state := map[int]string{turnPending: "running", turnDone: "done", turnCancelled: "cancelled: a prefix of", turnUnsure: "maybe absent, or a prefix of"}[t.state]
		fmt.Fprintf(&b, "[user:%q then %s %q] ", t.text, state, prefixed("agent:", t.chunks))
	}
	if b.Len() == 0 {
		return "(nothing)"
	}
	return b.String()
}

// matchReplay reports whether got replays turns: each done turn as its
// prompt and exactly its chunks, a cancelled one as its prompt and a prefix
// of its chunks, an unsure one like a cancelled one (and maybe the gap
// record of a turn a kill interrupted) or not at all.
func matchReplay(got []string, turns []*mTurn) bool {
	if len(turns) == 0 {
		return len(got) == 0
	}
	t, rest := turns[0], turns[1:]
	if (t.state == turnUnsure || t.state == turnPending) && matchReplay(got, rest) {
		return true
	}
	if len(got) == 0 || got[0] != "user:"+t.text {
		return false
	}
	got = got[1:]
	want := prefixed("agent:", t.chunks)
	if t.state == turnDone {
		return len(got) >= len(want) && slices.Equal(got[:len(want)], want) && matchReplay(got[len(want):], rest)
	}
	for k := 0; k <= len(want); k++ {
		if k > 0 && (len(got) < k || got[k-1] != want[k-1]) {
			return false
		}
		if matchReplay(got[k:], rest) {
			return true
		}
		// A turn a kill cut short ends with the interrupted turn's gap
		// record (sessions.md).
		if t.state != turnCancelled && len(got) > k && strings.HasPrefix(got[k], "agent:[acp-bridge: this turn was interrupted") && matchReplay(got[k+1:], rest) {
			return true
		}
	}
	return false
}

func (r *modelRun) closeSession(w *mWindow, s *mSession) {
	if s.open != w {
		r.t.Fatalf("bad sequence: close of S%d, not open in window w%d", s.idx, w.n)
	}
	id, _ := r.send(w, "session/close", fmt.Sprintf(`{"sessionId":%q}`, s.id))
	l := r.await(w, id)
	if !l.Get("result").IsObject() {
		r.fail("P6: session/close of S%d by its own window = %s, want a result", s.idx, l)
	}
	s.open = nil
	if w.held != nil && w.held.s == s {
		r.endHeld(w, "release")
	}
}

func (r *modelRun) deleteSession(w *mWindow, s *mSession) {
	w.named[s.id] = true
	id, _ := r.send(w, "session/delete", fmt.Sprintf(`{"sessionId":%q}`, s.id))
	l := r.await(w, id)
	if other := r.openElsewhere(s, w); other != nil {
		if !l.Get("error").Exists() || !anotherProcess(l) {
			r.fail("P6: session/delete of S%d %s in window w%d while window w%d has it open = %s, want an error saying it is open in another acp-bridge process",
				s.idx, s.id, w.n, other.n, l)
		}
		return
	}
	if s.deleted {
		return // any answer
	}
	if !l.Get("result").IsObject() && !s.fragile {
		r.fail("P6: session/delete of S%d %s (open here or nowhere) = %s, want a result", s.idx, s.id, l)
	}
	s.deleted, s.open = true, nil
}

// list compares session/list, every page, with the model.
func (r *modelRun) list(w *mWindow) {
	r.t.Helper()
	got := map[string][2]string{}
	cursor := ""
	for page := 0; ; page++ {
		params := "{}"
		if cursor != "" {
			params = fmt.Sprintf(`{"cursor":%q}`, cursor)
		}
		id, _ := r.send(w, "session/list", params)
		l := r.await(w, id)
		if !l.Get("result.sessions").IsArray() {
			r.fail("P4: session/list = %s, want sessions", l)
		}
		for _, e := range l.Get("result.sessions").Array() {
			sid := e.Get("sessionId").Str
			if _, dup := got[sid]; dup {
				r.fail("P4: session/list shows %s twice", sid)
			}
			got[sid] = [2]string{e.Get("cwd").Str, e.Get("title").Str}
		}
		if cursor = l.Get("result.nextCursor").Str; cursor == "" {
			break
		}
		if page > 100 {
			r.fail("P4: session/list pages do not end")
		}
	}
	for sid, ct := range got {
		i := slices.IndexFunc(r.sessions, func(s *mSession) bool { return s.id == sid })
		switch {
		case i < 0 && slices.Contains(r.probes, sid):
			r.fail("P3: session/list shows %q (cwd %q, title %q), an id no bridge opened that the editor only named", sid, ct[0], ct[1])
		case i < 0:
			r.fail("P4: session/list shows %q (cwd %q, title %q), which no session/new created", sid, ct[0], ct[1])
		case r.sessions[i].deleted:
			r.fail("P4: session/list shows S%d %s, which was deleted", i, sid)
		}
		s := r.sessions[i]
		if ct[0] != s.cwd {
			r.fail("P4: session/list shows S%d %s with cwd %q, want %q (its session/new's)", i, sid, ct[0], s.cwd)
		}
		if ct[1] != s.title && !slices.Contains(s.maybe, ct[1]) {
			r.fail("P4: session/list shows S%d %s titled %q, want %q (its first accepted prompt's first line)", i, sid, ct[1], s.title)
		}
		s.fragile = false
	}
	for _, s := range r.sessions {
		if _, ok := got[s.id]; !ok && !s.deleted {
			if s.fragile {
				s.deleted = true // lost to the kill before it reached the disk
				continue
			}
			r.fail("P4: session/list lacks S%d %s (cwd %q), created and not deleted; it shows %v", s.idx, s.id, s.cwd, got)
		}
	}
}

// verify is a checkpoint: the listing, and a load of every session no
// other window has open (closed again when it was not open here).
func (r *modelRun) verify() {
	ws := r.alive()
	if len(ws) == 0 {
		r.do(mop{kind: "open", w: len(r.wins)})
		ws = r.alive()
	}
	w := ws[0]
	r.list(w)
	for _, s := range r.sessions {
		if s.deleted || r.openElsewhere(s, w) != nil || w.held != nil && w.held.s == s {
			continue
		}
		was := s.open == w
		r.steps = append(r.steps, fmt.Sprintf("  verify: load w%d S%d", w.n, s.idx))
		r.open1(w, s, "session/load", false)
		if !was && s.open == w {
			r.steps = append(r.steps, fmt.Sprintf("  verify: close-session w%d S%d", w.n, s.idx))
			r.closeSession(w, s)
		}
	}
}

// finish ends the sequence: every window closed (exit 0, all answered).
func (r *modelRun) finish() {
	for _, w := range r.alive() {
		if w.held != nil {
			r.do(mop{kind: "release", w: w.n})
		}
		r.do(mop{kind: "close", w: w.n})
	}
}

// --- the random sequences ---------------------------------------------------

// next picks a random operation the model allows now.
func (r *modelRun) next() mop {
	alive := r.alive()
	if len(alive) == 0 {
		return mop{kind: "open", w: len(r.wins)}
	}
	w := alive[r.rng.IntN(len(alive))]
	var own, idle, elsewhere, nowhere, live []*mSession
	for _, s := range r.sessions {
		if s.deleted {
			continue
		}
		live = append(live, s)
		switch {
		case s.open == w:
			own = append(own, s)
			if w.held == nil || w.held.s != s {
				idle = append(idle, s)
			}
		case r.openElsewhere(s, w) != nil:
			elsewhere = append(elsewhere, s)
		default:
			nowhere = append(nowhere, s)
		}
	}
	pick := func(ss []*mSession) int { return ss[r.rng.IntN(len(ss))].idx }
	type choice struct {
		weight int
		make   func() mop
	}
	var cs []choice
	// add offers an operation, by the name -sessions.without knows it.
	add := func(name string, weight int, ok bool, f func() mop) {
		if ok && !slices.Contains(strings.Split(*modelWithout, ","), name) {
			cs = append(cs, choice{weight, f})
		}
	}
	add("open", 4, len(alive) < 3, func() mop { return mop{kind: "open", w: len(r.wins)} })
	add("close", 2, true, func() mop { return mop{kind: "close", w: w.n} })
	add("kill", 2, true, func() mop { return mop{kind: "kill", w: w.n} })
	add("new", 6, len(live) < 10, func() mop { return mop{kind: "new", w: w.n, n: r.rng.IntN(len(r.cwds))} })
	add("prompt", 12, len(idle) > 0, func() mop { return mop{kind: "prompt", w: w.n, s: pick(idle), n: r.rng.IntN(6)} })
	add("hold", 3, len(idle) > 0 && w.held == nil, func() mop { return mop{kind: "hold", w: w.n, s: pick(idle)} })
	add("release", 5, w.held != nil, func() mop { return mop{kind: "release", w: w.n} })
	add("cancel", 4, w.held != nil, func() mop { return mop{kind: "cancel", w: w.n} })
	add("prompt-foreign", 2, len(elsewhere) > 0, func() mop {
		return mop{kind: "prompt-foreign", w: w.n, s: pick(elsewhere), n: 1 + r.rng.IntN(3)}
	})
	add("prompt-unknown", 2, true, func() mop { return mop{kind: "prompt-unknown", w: w.n, id: r.unknownID(), n: 1 + r.rng.IntN(3)} })
	for _, k := range []string{"load-unknown", "resume-unknown", "close-unknown", "delete-unknown"} {
		add(k, 1, true, func() mop { return mop{kind: k, w: w.n, id: r.unknownID()} })
	}
	here := slices.DeleteFunc(slices.Concat(own, nowhere), func(s *mSession) bool { return w.held != nil && w.held.s == s })
	add("load", 5, len(here) > 0, func() mop { return mop{kind: "load", w: w.n, s: pick(here)} })
	add("resume", 3, len(here) > 0, func() mop { return mop{kind: "resume", w: w.n, s: pick(here)} })
	add("load-elsewhere", 2, len(elsewhere) > 0, func() mop {
		return mop{kind: []string{"load", "resume"}[r.rng.IntN(2)], w: w.n, s: pick(elsewhere)}
	})
	add("load-deleted", 2, len(r.sessions) > len(live), func() mop {
		dead := slices.DeleteFunc(slices.Clone(r.sessions), func(s *mSession) bool { return !s.deleted })
		return mop{kind: []string{"load", "resume"}[r.rng.IntN(2)], w: w.n, s: pick(dead)}
	})
	add("pipeline", 4, len(here) > 0, func() mop { return mop{kind: "pipeline", w: w.n, s: pick(here), n: r.rng.IntN(4)} })
	add("close-session", 3, len(own) > 0, func() mop { return mop{kind: "close-session", w: w.n, s: pick(own)} })
	add("delete", 2, len(own) > 0, func() mop { return mop{kind: "delete", w: w.n, s: pick(own)} })
	add("delete-nowhere", 1, len(nowhere) > 0, func() mop { return mop{kind: "delete", w: w.n, s: pick(nowhere)} })
	add("delete-elsewhere", 2, len(elsewhere) > 0, func() mop { return mop{kind: "delete", w: w.n, s: pick(elsewhere)} })
	add("list", 2, true, func() mop { return mop{kind: "list", w: w.n} })
	total := 0
	for _, c := range cs {
		total += c.weight
	}
	if total == 0 {
		return mop{kind: "list", w: w.n}
	}
	x := r.rng.IntN(total)
	for _, c := range cs {
		if x < c.weight {
			return c.make()
		}
		x -= c.weight
	}
	panic("unreachable")
}

// unknownID returns an id no bridge handed out: often one used before (to
// load what a prompt on it may have left), else one shaped like the
// agent's next ids, else a stranger.
func (r *modelRun) unknownID() string {
	fresh := slices.DeleteFunc(slices.Clone(r.probes), func(id string) bool { return r.handed[id] })
	if len(fresh) > 0 && r.rng.IntN(2) == 0 {
		return fresh[r.rng.IntN(len(fresh))]
	}
	for {
		var id string
		if r.rng.IntN(3) > 0 {
			id = fmt.Sprintf("sess-%d", 1+r.rng.IntN(len(r.sessions)+3))
		} else {
			id = fmt.Sprintf("ghost-%d", r.rng.IntN(1000))
		}
		if !r.handed[id] {
			return id
		}
	}
}

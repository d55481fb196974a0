package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/tidwall/gjson"
)

// The model-based test of the lent sink (lend.go): a scripted ACP agent
// whose link reads in bursts and says when it is about to wait (OnIdle,
// as legacy.Process does), so that the loop lends it the sink, and an
// editor that prompts one or two sessions at a time, cancels, asks other
// things mid-stream and answers the agent's requests late. Whatever the
// interleaving, the editor, the store, the session hook and the tap must
// see what the agent sent, in its order, once.

// lendRun is what one seed is run with.
type lendRun struct {
	seed   uint64
	noLend bool // the loop never lends: every chunk goes through the inbox
	store  bool // durable sessions on, in a store in a temporary directory
	tap    bool // Tap and OnSession set
	// grace: the cancel grace is 1 ms and the agent streams on for a
	// while after a cancel, so that the engine ends the turn itself
	// (cancel.go) while the stream may be under a lease, and drops the
	// rest of it; the editor never prompts a cancelled session again.
	grace bool
	// tight: queues of 1 KiB and an editor that reads slowly, so that
	// the lease holder's flushes wait for the editor's writer and the
	// link's reader waits for room in the inbox (backpressure).
	tight bool
	// crash: the agent's connection ends in the middle of a turn, right
	// after a burst (the link is lost while its reader may hold the
	// lease); the editor then stops.
	crash bool
	// crashAfterAnswer: with crash, the connection ends right after the
	// burst with the first prompt answer sent past crashAt instead.
	crashAfterAnswer bool
}

// lendRunFor picks a seed's configuration: a quarter of the seeds run
// without the lease, half with the store, two thirds with the hooks, a
// fifth with the short grace, a seventh with tight queues and about one
// in twelve lose the agent's connection; in every mix.
func lendRunFor(seed uint64) lendRun {
	return lendRun{seed: seed, noLend: seed%4 == 3, store: seed%2 == 0, tap: seed%3 != 0, grace: seed%5 == 1, tight: seed%7 == 2, crash: seed%11 == 4 && seed%5 != 1}
}

// lendResult is what a seed did, for the totals.
type lendResult struct {
	lent  int64 // frames handled under a lease (Bridge.lentChunks)
	plain int   // plain chunks the agent sent
	// What the editor did and saw: turns, rounds of two turns at once,
	// cancels, other requests mid-stream, the agent's requests, their
	// withdrawals ($/cancel_request), turns the engine ended itself.
	turns, pairs, cancels, others, calls, withdrawn, cut int
	crashes                                              int // seeds whose agent's connection ended mid-turn
}

func (r *lendResult) add(o lendResult) {
	r.lent += o.lent
	r.plain += o.plain
	r.turns += o.turns
	r.pairs += o.pairs
	r.cancels += o.cancels
	r.others += o.others
	r.calls += o.calls
	r.withdrawn += o.withdrawn
	r.cut += o.cut
	r.crashes += o.crashes
}

func TestLend_RandomInterleavings(t *testing.T) {
	seeds := 128
	if testing.Short() {
		seeds = 50
	}
	var lent, plain, plainLendOn int64
	var runs, runsNoLend int
	var all lendResult
	start := time.Now()
	for seed := range uint64(seeds) {
		run := lendRunFor(seed)
		var res lendResult
		ran := false
		// One subtest a seed: -run 'TestLend_RandomInterleavings/^17$'
		// runs seed 17 alone.
		if !t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { ran = true; res = runLendModel(t, run) }) {
			t.Fatalf("seed %d (%+v) failed", seed, run)
		}
		if !ran {
			continue
		}
		runs++
		all.add(res)
		plain += int64(res.plain)
		if run.noLend {
			runsNoLend++
			if res.lent != 0 {
				t.Fatalf("seed %d: %d frames handled under a lease with noLend set", seed, res.lent)
			}
			continue
		}
		lent += res.lent
		plainLendOn += int64(res.plain)
	}
	t.Logf("%d seeds (%d without the lease) in %v: %d plain chunks, %d of the %d sent with lending on went under a lease (%.0f%%)",
		runs, runsNoLend, time.Since(start).Round(time.Millisecond), plain, lent, plainLendOn, 100*float64(lent)/float64(max(plainLendOn, 1)))
	t.Logf("%d turns (%d rounds of two at once), %d cancels (%d turns ended by the engine's grace), %d other requests mid-stream, %d agent requests (%d withdrawn), %d connections lost mid-turn",
		all.turns, all.pairs, all.cancels, all.cut, all.others, all.calls, all.withdrawn, all.crashes)
	if lent == 0 && runs-runsNoLend >= 20 { // (a seed run alone may lend nothing)
		t.Fatal("no frame was handled under a lease: the test does not exercise the lent sink")
	}
}

// TestLend_Seed180 is seed 180 of the model, in which the agent's
// connection ends right after the agent answered a prompt: found by
// TestLend_RandomInterleavings. The shim holds a prompt's answer for its
// quiet period (translate/acp: FirstQuiet, 1 ms); when the link was lost
// within it, the engine failed the prompt (supervisor.linkLost →
// engine.linkDown, which fails every pending request) before it fed the
// translator LinkDown, on which the shim drops what it holds. The editor
// got "agent link lost" for a turn the agent ended with end_turn, and the
// store recorded it failed, with or without the lease. linkLost now gives
// the translator its pending Tick first.
func TestLend_Seed180(t *testing.T) {
	for _, noLend := range []bool{false, true} {
		run := lendRun{seed: 180, noLend: noLend, store: true, tap: true, crash: true, crashAfterAnswer: true}
		t.Run(fmt.Sprintf("noLend=%v", noLend), func(t *testing.T) { runLendModel(t, run) })
	}
}

// The model agent's frames are what its steps say: the plain chunks
// Plain (a lease takes them), the others not (they give it back).
func TestLend_ModelFramesClassify(t *testing.T) {
	a := &modelAgent{counters: map[string]int{}}
	for kind, want := range map[stepKind]bool{
		stepMessage: true, stepThought: true, stepToolCall: false, stepExtraMember: false, stepEscaped: false,
	} {
		f, _ := a.updateFrame("s1", kind)
		env, perr := translate.ParseEnvelope(f)
		if perr != nil {
			t.Fatalf("%s: %v", f, perr)
		}
		if got := translate.PlainChunk(&env); got != want {
			t.Errorf("PlainChunk(%s) = %v, want %v", f, got, want)
		}
	}
}

// runLendModel runs one seed: Serve with the model agent and the model
// editor, then checks every invariant.
func runLendModel(t *testing.T, run lendRun) lendResult {
	t.Helper()
	rng := rand.New(rand.NewPCG(run.seed, 0x1e4d))
	agentSeed, editorSeed := rng.Uint64(), rng.Uint64()

	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	inR, inW := io.Pipe()

	b := &Bridge{
		Dialect:       acp.Dialect,
		NewTranslator: func() translate.Translator { return acp.NewShim(acp.ShimOptions{}) },
		AgentName:     "model",
		Version:       "test",
		// A hang guard only, but with run.grace: the agent ends every
		// turn, cancelled ones too.
		CancelGrace: time.Minute,
		noLend:      run.noLend,
	}
	if run.grace {
		b.CancelGrace = time.Millisecond
	}
	if run.tight {
		b.QueueBytes = 1 << 10
	}
	var dir string
	var st *store.Store
	if run.store {
		dir = t.TempDir()
		st, err = store.Open(store.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		b.Sessions = &Durable{Store: st}
	}
	var hooks hookLog
	if run.tap {
		b.Tap = hooks.tap
		b.OnSession = hooks.session
	}
	ed := newModelEditor(t, editorSeed, run.tight, inW, outR)
	ed.grace = run.grace
	ed.crash = run.crash
	var dialMu sync.Mutex
	var agent *modelAgent
	var agentWG sync.WaitGroup
	b.Dial = func(ctx context.Context, s Spawn) (Link, error) {
		dialMu.Lock()
		defer dialMu.Unlock()
		if agent != nil {
			if !run.crash {
				t.Errorf("the bridge dialed a second agent connection (%+v); the model has one", s)
			}
			return nil, fmt.Errorf("the model has one agent connection")
		}
		a := newModelAgent(agentSeed)
		a.editorEnds = &ed.ends
		a.slowCancel = run.grace
		if run.crash {
			a.crashAt = 10 + a.rng.IntN(100)
			a.crashAfterAnswer = run.crashAfterAnswer
		}
		agent = a
		agentWG.Add(1)
		go func() { defer agentWG.Done(); a.run() }()
		return a, nil
	}

	served := make(chan error, 1)
	go func() {
		served <- b.Serve(context.Background(), inR, outW)
		outW.Close()
	}()

	driveOK := ed.drive()
	go func() {
		for range ed.lines { // (ed.out has them all)
		}
	}()
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("seed %d: Serve did not return after the editor's input ended (hang guard)", run.seed)
	}
	<-ed.readerDone
	dialMu.Lock()
	defer dialMu.Unlock()
	if agent != nil {
		agent.Close()
		agentWG.Wait()
	}
	if !driveOK || t.Failed() {
		ed.dump(t, agent)
		if run.store {
			st.Close()
		}
		return lendResult{}
	}
	if agent == nil {
		t.Fatal("the agent was never dialed")
	}

	checkLendModel(t, run, ed, agent, &hooks)
	if run.store {
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
		checkLendStore(t, dir, ed)
	}
	if t.Failed() {
		ed.dump(t, agent)
	}
	return lendResult{lent: b.lentChunks.Load(), plain: agent.plain, turns: len(ed.prompts), pairs: ed.pairs,
		cancels: ed.cancels, others: ed.others, calls: ed.calls, withdrawn: ed.withdrawn, cut: ed.cut, crashes: b2i(ed.crashed)}
}

// ---- the agent ----

type stepKind int

const (
	stepMessage     stepKind = iota // a plain agent_message_chunk
	stepThought                     // a plain agent_thought_chunk
	stepToolCall                    // a tool_call update
	stepExtraMember                 // a message chunk with an extra member: not Plain
	stepEscaped                     // a message chunk whose session id is escaped: not Plain
	stepPermission                  // session/request_permission, waited for
	stepReadFile                    // fs/read_text_file, waited for
)

// modelTurn is a prompt the agent is working on.
type modelTurn struct {
	sid       string
	promptID  string // the agent-hop id, raw
	steps     []stepKind
	pos       int
	waiting   string // the id of the agent's request it waits for, raw; "" if none
	cancelled bool
	extra     int // updates still to send after the cancel
}

// modelAgent is an ACP agent on an in-memory connection. Its frames
// reach Read in bursts: a burst's frames are returned back to back, and
// the agent makes its next burst only once Read has taken them all and
// is about to wait (after OnIdle's function ran). It is driven by one
// goroutine (run) and a seeded generator.
type modelAgent struct {
	rng *rand.Rand

	// Read's side.
	mu      sync.Mutex
	pending [][]byte
	more    chan struct{} // capacity 1: pending may be non-empty
	drained chan struct{} // capacity 1: Read found pending empty
	idle    func()

	// Write's side.
	wmu     sync.Mutex
	written [][]byte
	wsig    chan struct{} // capacity 1

	closed chan struct{}
	once   sync.Once

	// run's state.
	sessions int
	turns    []*modelTurn
	answers  [][]byte // answers to send in the next burst
	nextReq  int
	counters map[string]int // per session: the numbers of its updates and requests
	// slowCancel: after a cancel, a turn streams on for a while (lendRun.grace).
	slowCancel bool
	// crashAt, if not 0: the connection ends after the burst that takes
	// the frames sent past that many, in the middle of a turn.
	crashAt  int
	crashing bool
	// crashAfterAnswer: the connection ends right after the first
	// prompt answer's burst (crashNow), a turn the agent ended.
	crashAfterAnswer, crashNow bool
	// ends counts the prompt answers the agent sent, editorEnds those
	// the editor got (the model's own bookkeeping, shared with it).
	ends       int
	editorEnds *atomic.Int64
	cancelled  map[string]bool // sessions a turn of which was cancelled
	prompted   map[string]int  // prompts got, per session
	cut        map[string]bool // sessions whose turn the connection's end cut

	// What it sent, in order, for the checks (read after run returned).
	sent  [][]byte
	seq   map[string][]string // per session: "u<n>" updates, "r<n>" requests, "end" prompt answers
	plain int
}

func newModelAgent(seed uint64) *modelAgent {
	return &modelAgent{
		rng:       rand.New(rand.NewPCG(seed, 0xa9e7)),
		more:      make(chan struct{}, 1),
		drained:   make(chan struct{}, 1),
		wsig:      make(chan struct{}, 1),
		closed:    make(chan struct{}),
		nextReq:   100,
		counters:  map[string]int{},
		seq:       map[string][]string{},
		cancelled: map[string]bool{},
		prompted:  map[string]int{},
		cut:       map[string]bool{},
	}
}

// OnIdle is legacy.Process's: f runs on Read's goroutine when Read is
// about to wait.
func (a *modelAgent) OnIdle(f func()) { a.idle = f }

func (a *modelAgent) Read(ctx context.Context) ([]byte, error) {
	for {
		a.mu.Lock()
		if len(a.pending) > 0 {
			f := a.pending[0]
			a.pending[0] = nil
			a.pending = a.pending[1:]
			a.mu.Unlock()
			return f, nil
		}
		a.mu.Unlock()
		if a.idle != nil {
			a.idle()
		}
		select {
		case a.drained <- struct{}{}:
		default:
		}
		select {
		case <-a.more:
		case <-a.closed:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (a *modelAgent) Write(_ context.Context, frame []byte) error {
	select {
	case <-a.closed:
		return io.ErrClosedPipe
	default:
	}
	a.wmu.Lock()
	a.written = append(a.written, bytes.Clone(frame))
	a.wmu.Unlock()
	select {
	case a.wsig <- struct{}{}:
	default:
	}
	return nil
}

func (a *modelAgent) Close() error {
	a.once.Do(func() { close(a.closed) })
	return nil
}

// run is the agent: it takes what the bridge wrote, makes a burst of
// what it has to say, waits for Read to take it all, and again.
func (a *modelAgent) run() {
	for {
		a.wmu.Lock()
		in := a.written
		a.written = nil
		a.wmu.Unlock()
		for _, f := range in {
			a.handle(f)
		}
		// (crash: the connection ends after this burst, in the middle of
		// a turn, which the burst does not answer.)
		a.crashing = a.crashAt != 0 && len(a.sent) >= a.crashAt && len(a.turns) > 0
		burst := a.burst()
		if len(burst) == 0 && !a.crashing {
			select {
			case <-a.wsig:
				continue
			case <-a.closed:
				return
			}
		}
		a.mu.Lock()
		for _, f := range burst {
			a.pending = append(a.pending, bytes.Clone(f)) // (Read's caller owns what it returns; sent keeps the original)
		}
		a.mu.Unlock()
		select {
		case a.more <- struct{}{}:
		default:
		}
		if a.crashing || a.crashNow {
			// Gone: Read returns the burst, then the end.
			for _, tu := range a.turns {
				a.cut[tu.sid] = true
			}
			a.Close()
			return
		}
		for {
			select {
			case <-a.drained:
			case <-a.closed:
				return
			}
			a.mu.Lock()
			empty := len(a.pending) == 0
			a.mu.Unlock()
			if empty {
				break
			}
		}
		if a.rng.IntN(4) == 0 && !(a.slowCancel && slices.ContainsFunc(a.turns, func(tu *modelTurn) bool { return tu.cancelled })) {
			time.Sleep(time.Duration(a.rng.IntN(200)) * time.Microsecond)
		}
	}
}

// handle takes one frame the bridge wrote.
func (a *modelAgent) handle(f []byte) {
	r := gjson.GetManyBytes(f, "id", "method", "params.sessionId")
	id, method, sid := r[0], r[1].Str, r[2].Str
	switch {
	case method == "":
		// An answer to one of the agent's requests (or to one it no
		// longer waits for: the shim answered a withdrawn permission).
		for _, tu := range a.turns {
			if tu.waiting == id.Raw {
				tu.waiting = ""
			}
		}
	case !id.Exists():
		if method == "session/cancel" {
			for _, tu := range a.turns {
				if tu.sid == sid && !tu.cancelled {
					tu.cancelled = true
					a.cancelled[sid] = true
					tu.extra = a.rng.IntN(3)
					if a.slowCancel {
						tu.extra = 50 + a.rng.IntN(250)
					}
				}
			}
		}
	case method == "initialize":
		a.answer(id.Raw, `{"protocolVersion":1,"agentCapabilities":{"loadSession":false}}`)
	case method == "session/new":
		a.sessions++
		a.answer(id.Raw, fmt.Sprintf(`{"sessionId":"s%d"}`, a.sessions))
	case method == "session/prompt":
		a.prompted[sid]++
		tu := &modelTurn{sid: sid, promptID: id.Raw}
		n := a.rng.IntN(40)
		if a.rng.IntN(4) == 0 {
			n += 60 // now and then a longer stream
		}
		// A third of the turns stream text alone: the lease holds for
		// long stretches.
		pure := a.rng.IntN(3) == 0
		for range n {
			var k stepKind
			x := a.rng.IntN(100)
			if pure {
				x %= 75
			}
			switch {
			case x < 55:
				k = stepMessage
			case x < 75:
				k = stepThought
			case x < 83:
				k = stepToolCall
			case x < 88:
				k = stepExtraMember
			case x < 92:
				k = stepEscaped
			case x < 96:
				k = stepPermission
			default:
				k = stepReadFile
			}
			tu.steps = append(tu.steps, k)
		}
		a.turns = append(a.turns, tu)
	default:
		a.answer(id.Raw, `{}`)
	}
}

func (a *modelAgent) answer(id, result string) {
	a.answers = append(a.answers, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

// burst is the agent's next frames: the answers it owes, then up to a
// random number of steps of the turns that are not waiting, in a random
// mix of sessions.
func (a *modelAgent) burst() [][]byte {
	out := a.answers
	a.answers = nil
	a.sent = append(a.sent, out...)
	size := 1 + a.rng.IntN(8)
	switch {
	case a.slowCancel && slices.ContainsFunc(a.turns, func(tu *modelTurn) bool { return tu.cancelled }):
		// A cancelled turn's long tail, in long bursts back to back: the
		// grace runs out while the link's reader is in the middle of one.
		size += 20 + a.rng.IntN(60)
	case a.rng.IntN(5) == 0:
		size += a.rng.IntN(40)
	}
	for len(out) < size {
		var ready []*modelTurn
		for _, tu := range a.turns {
			answers := tu.cancelled && tu.extra == 0 || !tu.cancelled && tu.pos == len(tu.steps)
			if (tu.waiting == "" || tu.cancelled) && !(a.crashing && answers) {
				ready = append(ready, tu)
			}
		}
		if len(ready) == 0 {
			break
		}
		out = append(out, a.step(ready[a.rng.IntN(len(ready))]))
	}
	return out
}

// step is turn tu's next frame.
func (a *modelAgent) step(tu *modelTurn) []byte {
	var f []byte
	switch {
	case tu.cancelled && tu.extra == 0, !tu.cancelled && tu.pos == len(tu.steps):
		stop := "end_turn"
		if tu.cancelled {
			stop = "cancelled"
		}
		f = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"stopReason":%q}}`, tu.promptID, stop)
		a.seq[tu.sid] = append(a.seq[tu.sid], "end")
		a.turns = slices.DeleteFunc(a.turns, func(x *modelTurn) bool { return x == tu })
		a.crashNow = a.crashAfterAnswer
		a.ends++
	case tu.cancelled:
		tu.extra--
		var tok string
		f, tok = a.updateFrame(tu.sid, stepMessage)
		a.seq[tu.sid] = append(a.seq[tu.sid], tok)
	default:
		k := tu.steps[tu.pos]
		tu.pos++
		var tok string
		switch k {
		case stepPermission, stepReadFile:
			a.nextReq++
			a.counters[tu.sid]++
			n := a.counters[tu.sid]
			tu.waiting = strconv.Itoa(a.nextReq)
			if k == stepPermission {
				f = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"r%d"},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"}]}}`, a.nextReq, tu.sid, n)
			} else {
				f = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{"sessionId":%q,"path":"/model/r%d"}}`, a.nextReq, tu.sid, n)
			}
			tok = "r" + strconv.Itoa(n)
		default:
			f, tok = a.updateFrame(tu.sid, k)
		}
		a.seq[tu.sid] = append(a.seq[tu.sid], tok)
	}
	a.sent = append(a.sent, f)
	return f
}

// updateFrame is session sid's next update of kind k, numbered, and its
// token ("u<n>").
func (a *modelAgent) updateFrame(sid string, k stepKind) ([]byte, string) {
	a.counters[sid]++
	n := a.counters[sid]
	var f []byte
	switch k {
	case stepMessage, stepThought:
		kind := "agent_message_chunk"
		if k == stepThought {
			kind = "agent_thought_chunk"
		}
		// The exact compact form the SDKs write: Plain.
		f = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":%q,"content":{"type":"text","text":"u%d"}}}}`, sid, kind, n)
		a.plain++
	case stepToolCall:
		f = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"tool_call","toolCallId":"u%d","title":"read u%d","kind":"read","status":"pending"}}}`, sid, n, n)
	case stepExtraMember:
		f = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"u%d"},"_meta":{"model":%d}}}}`, sid, n, n)
	case stepEscaped:
		// The session id's first letter escaped: the same id, read
		// the long way.
		f = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"\u%04x%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"u%d\n\"quoted\""}}}}`, sid[0], sid[1:], n)
	}
	return f, "u" + strconv.Itoa(n)
}

// ---- the editor ----

// modelEditor drives Serve's input and reads its output, as an editor.
type modelEditor struct {
	t   *testing.T
	rng *rand.Rand

	wmu sync.Mutex
	in  io.WriteCloser

	lines      chan []byte // the output, line by line, for drive
	readerDone chan struct{}

	mu  sync.Mutex // guards out and the answers' AfterFuncs' writes
	out [][]byte   // every line the editor got, in order

	nextID   int
	methods  map[int]string // the editor's requests, by id
	prompts  map[int]string // the session of each prompt, by id
	answered map[int]int    // answers got, by id
	seq      map[string][]string
	pend     sync.WaitGroup // answers to the agent's requests not written yet
	// grace: a cancelled session is not prompted again (lendRun.grace);
	// cut counts its turns the engine ended itself.
	grace bool
	cut   int
	// crash: the agent's connection may end (lendRun.crash); crashed
	// once a prompt failed: the editor asks nothing more.
	crash, crashed bool
	ends           atomic.Int64 // prompts answered with a result
	// Counts, for the report (lendResult).
	pairs, cancels, others, calls, withdrawn int
}

func newModelEditor(t *testing.T, seed uint64, slow bool, in io.WriteCloser, out io.Reader) *modelEditor {
	ed := &modelEditor{
		t: t, rng: rand.New(rand.NewPCG(seed, 0xed17)), in: in,
		lines: make(chan []byte, 4096), readerDone: make(chan struct{}),
		methods: map[int]string{}, prompts: map[int]string{}, answered: map[int]int{},
		seq: map[string][]string{},
	}
	go func() {
		defer close(ed.readerDone)
		defer close(ed.lines)
		if slow {
			// Small reads, a pause now and then: the bridge's output
			// pipe fills up.
			out = &slowReader{r: out, rng: rand.New(rand.NewPCG(seed, 0x5104))}
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			ed.mu.Lock()
			ed.out = append(ed.out, line)
			ed.mu.Unlock()
			ed.lines <- line
		}
	}()
	return ed
}

func (ed *modelEditor) write(line string) {
	ed.wmu.Lock()
	defer ed.wmu.Unlock()
	_, _ = io.WriteString(ed.in, line+"\n") // (fails only once the bridge stopped reading: the checks will tell)
}

func (ed *modelEditor) request(method, params string) int {
	id := ed.nextID
	ed.nextID++
	ed.methods[id] = method
	ed.write(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	return id
}

// next is the next line of the output; false if there is none within
// the hang guard.
func (ed *modelEditor) next() ([]byte, bool) {
	select {
	case line, ok := <-ed.lines:
		if !ok {
			ed.t.Errorf("the bridge's output ended early")
		}
		return line, ok
	case <-time.After(20 * time.Second):
		ed.t.Errorf("nothing from the bridge in 20 s (hang guard)")
		return nil, false
	}
}

// drive is the editor's whole conversation; false if it could not go on.
func (ed *modelEditor) drive() bool {
	wait := func(id int) ([]byte, bool) {
		for {
			line, ok := ed.next()
			if !ok {
				return nil, false
			}
			if got, ok := ed.take(line); ok && got == id {
				return line, true
			}
		}
	}
	if _, ok := wait(ed.request("initialize", `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true}}}`)); !ok {
		return false
	}
	var sids []string
	for range 1 + ed.rng.IntN(3) {
		line, ok := wait(ed.request("session/new", `{"cwd":"/model","mcpServers":[]}`))
		if !ok {
			return false
		}
		sid := gjson.GetBytes(line, "result.sessionId").Str
		if sid == "" {
			ed.t.Errorf("session/new answered %s", line)
			return false
		}
		sids = append(sids, sid)
	}
	for range 2 + ed.rng.IntN(4) {
		if len(sids) == 0 || ed.crashed {
			break // (grace: every session was cancelled; crash: the agent is gone)
		}
		// One session's turn, or two at once (then no lease is lent).
		turn := []string{sids[ed.rng.IntN(len(sids))]}
		if len(sids) > 1 && ed.rng.IntN(3) == 0 {
			other := sids[ed.rng.IntN(len(sids))]
			if other != turn[0] {
				turn = append(turn, other)
			}
		}
		if len(turn) == 2 {
			ed.pairs++
		}
		open := map[int]string{}
		cancelled := map[string]bool{}
		for _, sid := range turn {
			ed.mu.Lock()
			ed.seq[sid] = append(ed.seq[sid], "P")
			ed.mu.Unlock()
			id := ed.request("session/prompt", fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}`, sid))
			ed.prompts[id] = sid
			open[id] = sid
			if len(turn) == 2 && ed.rng.IntN(2) == 0 {
				// The second session's prompt a little later: it comes
				// while the first's stream may be under a lease.
				time.Sleep(time.Duration(ed.rng.IntN(500)) * time.Microsecond)
			}
		}
		for len(open) > 0 {
			line, ok := ed.next()
			if !ok {
				return false
			}
			if id, ok := ed.take(line); ok {
				delete(open, id)
			}
			// Now and then, mid-stream: a cancel, another request.
			switch x := ed.rng.IntN(100); {
			case ed.crashed:
			case x < 1:
				for _, sid := range open {
					if !cancelled[sid] {
						cancelled[sid] = true
						ed.cancels++
						ed.write(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid))
						if ed.grace {
							// Its agent may still be streaming the cancelled
							// turn, which the engine drops: a new turn would
							// take that stream for its own.
							sids = slices.DeleteFunc(sids, func(s string) bool { return s == sid })
						}
						break
					}
				}
			case x < 2 && len(sids) > 0:
				ed.others++
				ed.request("session/set_mode", fmt.Sprintf(`{"sessionId":%q,"modeId":"m%d"}`, sids[ed.rng.IntN(len(sids))], x))
			}
		}
	}
	// Every request answered before the input ends.
	ed.pend.Wait()
	for {
		missing := false
		for id := range ed.methods {
			if ed.answered[id] == 0 {
				missing = true
			}
		}
		if !missing {
			ed.pend.Wait()
			return true
		}
		line, ok := ed.next()
		if !ok {
			return false
		}
		ed.take(line)
	}
}

// take reads one line of the output: it records the sessions' updates,
// answers the agent's requests (later, now and then) and returns the id
// of an answer to one of the editor's requests.
func (ed *modelEditor) take(line []byte) (int, bool) {
	t := ed.t
	if !json.Valid(line) || gjson.GetBytes(line, "jsonrpc").Str != "2.0" {
		t.Errorf("not a JSON-RPC 2.0 message: %s", line)
		return 0, false
	}
	r := gjson.GetManyBytes(line, "id", "method", "params.sessionId")
	id, method, sid := r[0], r[1].Str, r[2].Str
	switch {
	case method == "session/update":
		u := gjson.GetBytes(line, "params.update")
		tok := u.Get("content.text").Str
		if u.Get("sessionUpdate").Str == "tool_call" {
			tok = u.Get("toolCallId").Str
		}
		ed.mu.Lock()
		ed.seq[sid] = append(ed.seq[sid], number(tok))
		ed.mu.Unlock()
	case method != "" && id.Exists():
		var tok, result string
		switch method {
		case "session/request_permission":
			tok = gjson.GetBytes(line, "params.toolCall.toolCallId").Str
			result = `{"outcome":{"outcome":"selected","optionId":"allow"}}`
		case "fs/read_text_file":
			tok = strings.TrimPrefix(gjson.GetBytes(line, "params.path").Str, "/model/")
			result = `{"content":"model"}`
		default:
			t.Errorf("the agent never sends %s: %s", method, line)
			return 0, false
		}
		ed.calls++
		ed.mu.Lock()
		ed.seq[sid] = append(ed.seq[sid], tok)
		ed.mu.Unlock()
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id.Raw, result)
		if ed.rng.IntN(3) == 0 {
			ed.write(answer)
			break
		}
		ed.pend.Add(1)
		time.AfterFunc(time.Duration(ed.rng.IntN(2000))*time.Microsecond, func() {
			defer ed.pend.Done()
			ed.write(answer)
		})
	case method != "":
		if method != "$/cancel_request" {
			t.Errorf("unexpected notification: %s", line)
		}
		ed.withdrawn++
	default:
		n, err := strconv.Atoi(id.Raw)
		if err != nil || ed.methods[n] == "" {
			t.Errorf("an answer to no request of the editor's: %s", line)
			return 0, false
		}
		ed.answered[n]++
		if ed.answered[n] > 1 {
			t.Errorf("request %d (%s) answered twice: %s", n, ed.methods[n], line)
		}
		failed := !gjson.GetBytes(line, "result").Exists()
		if failed {
			if !ed.crash {
				t.Errorf("%s failed: %s", ed.methods[n], line)
			}
			ed.crashed = true
		}
		if psid, ok := ed.prompts[n]; ok {
			tok := "end"
			if failed {
				tok = "fail"
			} else {
				ed.ends.Add(1)
			}
			ed.mu.Lock()
			ed.seq[psid] = append(ed.seq[psid], tok)
			ed.mu.Unlock()
		}
		return n, true
	}
	return 0, false
}

// slowReader reads at most 256 bytes at a time, and pauses before one
// read in eight.
type slowReader struct {
	r   io.Reader
	rng *rand.Rand // (the editor's reader goroutine's own)
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.rng.IntN(8) == 0 {
		time.Sleep(time.Duration(s.rng.IntN(100)) * time.Microsecond)
	}
	return s.r.Read(p[:min(len(p), 256)])
}

// number is tok ("u17", "r3", "u4\n…") cut to its letter and number.
// chunkTokens finds the numbers of the model's text chunks ("u17") in a
// text, joined or not.
var chunkTokens = regexp.MustCompile(`u[0-9]+`)

func number(tok string) string {
	i := 1
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		i++
	}
	return tok[:min(i, len(tok))]
}

// dump logs what the editor got and the agent sent, for a failed seed.
func (ed *modelEditor) dump(t *testing.T, a *modelAgent) {
	t.Helper()
	ed.mu.Lock()
	defer ed.mu.Unlock()
	var b strings.Builder
	for _, l := range ed.out {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	t.Logf("the editor got:\n%s", b.String())
	if a != nil {
		b.Reset()
		for _, f := range a.sent {
			fmt.Fprintf(&b, "  %s\n", f)
		}
		t.Logf("the agent sent:\n%s", b.String())
	}
}

// ---- the checks ----

// hookLog is what the Tap and OnSession hooks saw.
type hookLog struct {
	mu         sync.Mutex
	agentIn    [][]byte // agent → bridge
	editorOut  [][]byte // bridge → editor
	sessionSeq map[string][]string
}

func (h *hookLog) tap(ev TapEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case ev.Hop == AgentHop && ev.Inbound:
		h.agentIn = append(h.agentIn, bytes.Clone(ev.Message))
	case ev.Hop == EditorHop && !ev.Inbound:
		h.editorOut = append(h.editorOut, bytes.Clone(ev.Message))
	}
}

func (h *hookLog) session(ev SessionEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessionSeq == nil {
		h.sessionSeq = map[string][]string{}
	}
	var tok string
	switch ev.Kind {
	case SessionPrompt:
		tok = "P"
	case SessionTurnEnded:
		tok = "end"
		if ev.Failed {
			tok = "fail"
		}
	case SessionUpdate:
		u := gjson.GetBytes(ev.Body, "update")
		tok = u.Get("content.text").Str
		if u.Get("sessionUpdate").Str == "tool_call" {
			tok = u.Get("toolCallId").Str
		}
		tok = number(tok)
	default:
		return
	}
	h.sessionSeq[ev.Session] = append(h.sessionSeq[ev.Session], tok)
}

// checkLendModel checks what the editor and the hooks saw against what
// the agent sent.
func checkLendModel(t *testing.T, run lendRun, ed *modelEditor, a *modelAgent, h *hookLog) {
	t.Helper()
	// Per session: the agent's updates, requests and answers, in its
	// order, each once; the editor's prompts aside.
	sids := map[string]bool{}
	for sid := range a.seq {
		sids[sid] = true
	}
	for sid := range ed.seq {
		sids[sid] = true
	}
	for sid := range sids {
		got := slices.DeleteFunc(slices.Clone(ed.seq[sid]), func(s string) bool { return s == "P" })
		want := a.seq[sid]
		cut := a.cut[sid]
		unseen := strings.Count(strings.Join(ed.seq[sid], " "), "P") > a.prompted[sid]
		if run.crash && len(got) > 0 && got[len(got)-1] == "fail" && (cut || unseen) {
			// The turn the connection's end cut, or a prompt the agent
			// never got: failed, after all the agent sent.
			got = got[:len(got)-1]
		}
		if run.grace && !slices.Equal(got, want) && a.cancelled[sid] && len(got) > 0 && got[len(got)-1] == "end" {
			// The engine may have ended the session's last turn, the
			// cancelled one, itself (its grace ran out) and dropped what
			// the agent sent of it after that: the editor got a prefix of
			// the agent's turn and the engine's answer, nothing else. (The
			// agent may not have ended the turn before the bridge stopped.)
			prefix := got[:len(got)-1]
			if len(prefix) <= len(want) && slices.Equal(prefix, want[:len(prefix)]) &&
				!strings.Contains(strings.TrimSuffix(strings.Join(want[len(prefix):], " "), "end"), "end") {
				ed.cut++
				continue
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("seed %d, session %s: the editor got\n  %q\nthe agent sent\n  %q\n(first difference at %d)", run.seed, sid, got, want, firstDiff(got, want))
		}
	}
	if !run.tap {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The tap saw every frame of the agent, in order, and every message
	// the editor was written, as written.
	sent := a.sent
	if run.grace && len(h.agentIn) < len(sent) {
		// The agent may have been streaming a cancelled turn the
		// engine had ended when the bridge stopped.
		sent = sent[:len(h.agentIn)]
	}
	if i := firstDiffBytes(h.agentIn, sent); i >= 0 {
		t.Errorf("seed %d: the tap's agent frames differ from what the agent sent at %d (tap %d frames, agent %d)", run.seed, i, len(h.agentIn), len(a.sent))
	}
	if i := firstDiffBytes(h.editorOut, ed.out); i >= 0 {
		t.Errorf("seed %d: the tap's editor messages differ from the editor's output at %d (tap %d, output %d)", run.seed, i, len(h.editorOut), len(ed.out))
	}
	// OnSession saw each session's prompts, updates and answers as the
	// editor did.
	for sid := range ed.seq {
		got := h.sessionSeq[sid]
		want := slices.DeleteFunc(slices.Clone(ed.seq[sid]), func(s string) bool { return strings.HasPrefix(s, "r") })
		if !slices.Equal(got, want) {
			t.Errorf("seed %d, session %s: OnSession saw\n  %q\nthe editor\n  %q\n(first difference at %d)", run.seed, sid, got, want, firstDiff(got, want))
		}
	}
}

// checkLendStore checks that each session's transcript holds its prompts,
// the updates the editor got and its answers, in the editor's order.
func checkLendStore(t *testing.T, dir string, ed *modelEditor) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for sid, seq := range ed.seq {
		done := make(chan *store.Transcript, 1)
		st.Load(sid, func(tr *store.Transcript, err error) {
			if err != nil {
				t.Errorf("loading %s: %v", sid, err)
			}
			done <- tr
		})
		tr := <-done
		if tr == nil {
			continue
		}
		var got []string
		for _, rec := range tr.Records {
			switch rec.Kind {
			case store.KindPrompt:
				got = append(got, "P")
			case store.KindStop:
				if rec.Failed {
					got = append(got, "fail")
				} else {
					got = append(got, "end")
				}
			case store.KindUpdate:
				u := gjson.GetBytes(rec.Body, "update")
				if u.Get("sessionUpdate").Str == "tool_call" {
					got = append(got, number(u.Get("toolCallId").Str))
					break
				}
				// The store keeps a run of plain text chunks of one
				// kind as one record of their joined text
				// (store.Lines.TextChunk): each "uN" in it was one
				// update the editor got.
				got = append(got, chunkTokens.FindAllString(u.Get("content.text").Str, -1)...)
			case store.KindMeta:
			default:
				got = append(got, rec.Kind+":"+string(rec.Body))
			}
		}
		want := slices.DeleteFunc(slices.Clone(seq), func(s string) bool { return strings.HasPrefix(s, "r") })
		if !slices.Equal(got, want) || tr.Skipped != 0 {
			t.Errorf("session %s: the store holds\n  %q (%d lines skipped)\nthe editor got\n  %q\n(first difference at %d)", sid, got, tr.Skipped, want, firstDiff(got, want))
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// firstDiffBytes is the index of the first message that differs, -1 if
// none does.
func firstDiffBytes(a, b [][]byte) int {
	for i := range min(len(a), len(b)) {
		if !bytes.Equal(a[i], b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

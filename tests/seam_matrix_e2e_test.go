package tests

// The seam matrix (issue 52's class test). One scenario suite, seamSuite,
// runs in every cell of
//
//	editor    {v1, v2}
//	backend   {acp (ACP v1 relay), acp-v2, acp-v0, claude-stream-json, rules (agent-rpc profile)}
//	transport {child stdio, WebSocket, Streamable HTTP to `acp-bridge serve`,
//	           bridge → bridge (editor → acp-bridge --url http:// → acp-bridge serve → agent)}
//	sessions  {on, off}
//	trace     {on, off}
//
// A cell is one point of that product: its own agent, bridge(s) and
// editor, started for it alone. By default the test runs a pairwise
// covering array of the product (seamPairwise: every pair of values of
// any two dimensions is in some cell, 19 cells chosen deterministically
// with a fixed seed, about a minute on 2 cores); ACP_SEAM_MATRIX=full runs
// every applicable cell of the product (124, several minutes), and
// ACP_SEAM_CELLS=REGEXP only the cells whose name matches (with the
// reference), e.g. ACP_SEAM_CELLS='^v2/rules/'. The suite runs a turn with text, a tool
// call and a permission; a cancelled turn; two prompts at once; close and
// load (v2: resume with a replay); close and resume; a second initialize
// and a turn after it; and, on the cells seamIdle names, a turn after the link
// sat idle 15 s. Each step's outcome is reduced to a seamOutcome (the
// agent's text, the tool calls' final states, the permission outcome by
// the chosen option's kind, the stop reason, what a load replays), which
// is what must not depend on the seams; ids, version-specific shapes and
// the order of fields do. Every cell's outcome must equal the reference
// cell's (seamReference). Every line the bridge writes to the editor is
// validated against the schema of the editor's version (the harness's
// checks on stdout; on Streamable HTTP, each message the SDK client
// received), and the v2 editor and every editor over Streamable HTTP is
// the TypeScript SDK's, which validates what it receives itself.
//
// A cell, or a step of a cell, that cannot apply is named in seamNA with
// the reason, and listed in the test's log; nothing is skipped silently.
//
// To add a dimension: add its values to seamCell and to seamCells' loops,
// give the cell's name a part for it, make seamStart honour it, and say in
// seamNA where it cannot apply. To add a backend: a seamBackend entry with
// its fake's "seam" script (every fake says "seam-before", runs one tool
// after asking permission, and says "seam-after").

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakeclaude "github.com/acp-bridge/acp-bridge/tests/fakeagent/claude"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
	fakev0 "github.com/acp-bridge/acp-bridge/tests/fakeagent/v0"
	"github.com/acp-bridge/acp-bridge/translate/acpschema"
	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

// seamBackend is one kind of agent behind the bridge, with its fake.
type seamBackend struct {
	name string
	// dialect are the bridge's flags that select the dialect.
	dialect []string
	// child returns the argv (after "--") and environment of the fake
	// run as a child.
	child func(t *testing.T) ([]string, []string)
	// ws is the fake served over a WebSocket; nil when it has none.
	ws fakeagent.ServeFunc
	// cancelWord is the prompt of a turn that runs until cancelled.
	cancelWord string
	// permission: the fake's seam turn asks for permission.
	permission bool
}

func seamSelf(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

var seamBackends = []seamBackend{
	{
		name:  "acp",
		child: func(t *testing.T) ([]string, []string) { return []string{seamSelf(t)}, []string{"FAKE_AGENT=acp"} },
		ws:    fakeagent.Serve, cancelWord: "wait-cancel", permission: true,
	},
	{
		name: "acp-v2",
		child: func(t *testing.T) ([]string, []string) {
			return NodeScript(t, sdkAgentV2Script), nil
		},
		cancelWord: "slow", permission: true,
	},
	{
		name:    "acp-v0",
		dialect: []string{"--dialect", "acp-v0"},
		child: func(t *testing.T) ([]string, []string) {
			return []string{seamSelf(t)}, []string{"FAKE_AGENT=acp-v0", "FAKE_V0_JOURNAL=" + t.TempDir()}
		},
		ws:         seamV0WS,
		cancelWord: "slow", permission: true,
	},
	{
		name:    "claude",
		dialect: []string{"--dialect", "claude-stream-json"},
		child: func(t *testing.T) ([]string, []string) {
			return []string{seamSelf(t)}, []string{"FAKE_AGENT=claude", fakeclaude.EnvJournal + "=" + t.TempDir()}
		},
		cancelWord: "slow", permission: true,
	},
	{
		name:    "rules",
		dialect: []string{"--dialect", "agent-rpc"},
		child: func(t *testing.T) ([]string, []string) {
			return []string{seamSelf(t)}, []string{"FAKE_AGENT=rules-agent-rpc"}
		},
		ws:         fakerules.AgentRPC,
		cancelWord: "slow",
	},
}

// seamV0WS is the acp-v0 fake over a WebSocket, journalling nowhere the
// test reads.
func seamV0WS(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	return fakev0.ServeFunc(os.TempDir(), false)(r, w, opt)
}

// seamCell is one point of the matrix.
type seamCell struct {
	editor    int // ACP version the editor speaks
	backend   seamBackend
	transport string // child, ws, http, b2b
	sessions  bool
	trace     bool
	// idle: the cell also runs the 15 s idle step (seamIdle); not a
	// dimension, and not part of the name.
	idle bool
}

func (c seamCell) name() string {
	s := fmt.Sprintf("v%d/%s/%s/sessions-", c.editor, c.backend.name, c.transport)
	s += map[bool]string{true: "on", false: "off"}[c.sessions]
	return s + "/trace-" + map[bool]string{true: "on", false: "off"}[c.trace]
}

// seamReference is the cell every other one is compared with.
var seamReference = seamCell{editor: 1, backend: seamBackends[0], transport: "child", sessions: true}

var seamTransports = []string{"child", "ws", "http", "b2b"}

// seamCells is the whole product, the reference first.
func seamAllCells() []seamCell {
	cells := []seamCell{seamReference}
	for _, ed := range []int{1, 2} {
		for _, b := range seamBackends {
			for _, tr := range seamTransports {
				for _, s := range []bool{true, false} {
					for _, tc := range []bool{false, true} {
						c := seamCell{editor: ed, backend: b, transport: tr, sessions: s, trace: tc}
						if c.name() != seamReference.name() {
							cells = append(cells, c)
						}
					}
				}
			}
		}
	}
	return cells
}

// seamValues are a cell's values, one per dimension, as seamPairwise
// pairs them.
func (c seamCell) values() [5]string {
	return [5]string{fmt.Sprint("editor=", c.editor), "backend=" + c.backend.name, "transport=" + c.transport,
		fmt.Sprint("sessions=", c.sessions), fmt.Sprint("trace=", c.trace)}
}

// seamPairwise picks, from the applicable cells of all, a covering array
// of strength 2: every pair of values of two dimensions that some
// applicable cell has is in at least one chosen cell. It is greedy (each
// step takes the cell that covers the most pairs not yet covered), the
// reference first, and deterministic: ties go to the earlier cell in an
// order shuffled once with a fixed seed, so the same cells run every time
// and a cell that fails is named the same way the next time.
func seamPairwise(all []seamCell) []seamCell {
	type pair struct{ a, b string }
	pairsOf := func(c seamCell) []pair {
		v := c.values()
		var ps []pair
		for i := range v {
			for j := i + 1; j < len(v); j++ {
				ps = append(ps, pair{v[i], v[j]})
			}
		}
		return ps
	}
	var cands []seamCell
	need := map[pair]bool{}
	for _, c := range all {
		if seamNA(c) != "" {
			continue
		}
		cands = append(cands, c)
		for _, p := range pairsOf(c) {
			need[p] = true
		}
	}
	rng := rand.New(rand.NewPCG(52, 2))
	rest := slices.Clone(cands[1:]) // cands[0] is the reference
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	chosen := []seamCell{cands[0]}
	for _, p := range pairsOf(cands[0]) {
		delete(need, p)
	}
	for len(need) > 0 {
		best, bestN := -1, 0
		for i, c := range rest {
			n := 0
			for _, p := range pairsOf(c) {
				if need[p] {
					n++
				}
			}
			if n > bestN {
				best, bestN = i, n
			}
		}
		c := rest[best]
		rest = slices.Delete(rest, best, best+1)
		chosen = append(chosen, c)
		for _, p := range pairsOf(c) {
			delete(need, p)
		}
	}
	return chosen
}

// seamCells are the cells this run runs, the reference first: the
// pairwise covering array of the product (seamPairwise) by default, the
// whole product with ACP_SEAM_MATRIX=full; ACP_SEAM_CELLS=REGEXP keeps
// only the cells whose name it matches (and the reference, which every
// cell is compared with).
func seamCells(t *testing.T) []seamCell {
	all := seamAllCells()
	var cells []seamCell
	switch m := os.Getenv("ACP_SEAM_MATRIX"); m {
	case "full":
		cells = all
		for i, c := range cells {
			cells[i].idle = c.backend.name == "acp" && c.sessions && !c.trace
		}
	case "", "pairwise":
		cells = seamPairwise(all)
		idled := map[string]bool{}
		for i, c := range cells {
			k := fmt.Sprint(c.editor, c.transport)
			cells[i].idle = !idled[k]
			idled[k] = true
		}
	default:
		t.Fatalf("ACP_SEAM_MATRIX=%q: want full or pairwise", m)
	}
	if f := os.Getenv("ACP_SEAM_CELLS"); f != "" {
		re, err := regexp.Compile(f)
		if err != nil {
			t.Fatalf("ACP_SEAM_CELLS: %v", err)
		}
		cells = slices.DeleteFunc(cells, func(c seamCell) bool {
			return c.name() != seamReference.name() && !re.MatchString(c.name())
		})
	}
	return cells
}

// seamNA says why a whole cell cannot apply ("" when it can).
func seamNA(c seamCell) string {
	if c.transport == "ws" && c.backend.ws == nil {
		switch c.backend.name {
		case "claude":
			return "claude-stream-json is a CLI on stdio: the dialect has no WebSocket transport"
		case "acp-v2":
			return "the ACP v2 fake is the TypeScript SDK's agent on stdio; the SDK has no WebSocket agent server to put it behind"
		}
		return "the backend has no WebSocket transport"
	}
	if c.transport == "http" && c.trace {
		return "acp-bridge serve refuses --trace (it serves many editors; a trace is one editor's): the editor's side traces, which is the b2b cell"
	}
	return ""
}

// seamStepNA says why a step of an applicable cell cannot apply ("" when it
// can).
func seamStepNA(c seamCell, step string) string {
	switch step {
	case "load", "resume":
		if !c.sessions {
			return "--no-sessions: the bridge keeps no transcript, so a load or resume is the agent's own (the fakes differ: most have none)"
		}
	case "reinitialize":
		if c.editor == 2 {
			return "ACP v2 forbids a repeated initialize after other requests; the v2 SDK editor refuses to send one"
		}
	case "permission":
		if !c.backend.permission {
			return "the agent-rpc format has no permission requests"
		}
	}
	return ""
}

// seamIdle says whether cell c also runs the 15 s idle step. Idle waits
// cost no CPU but 15 s each; one per transport and editor covers the
// links' own deadlines (dial, handshake, earlier writes). In the whole
// product those are the cells over the ACP v1 relay with sessions on and
// no trace; in the pairwise array (which may hold none of those), the
// first cell chosen of each editor and transport (c.idle, set by
// seamCells).
func seamIdle(c seamCell) bool {
	return c.idle
}

// seamWait guards every wait of the suite against a hang, and only that:
// a cell starts up to three processes (node ones among them) while the
// others run, and on a loaded 2-core machine a node agent has taken 18 s
// to read its first line. No step is timed.
const seamWait = sdkWait

// seamParallel is how many cells run at once.
const seamParallel = 24

// seamTurn is the normalized outcome of one turn or replay.
type seamTurn struct {
	User       string   `json:"user,omitempty"`
	Text       string   `json:"text"`
	Tools      []string `json:"tools"`
	Permission string   `json:"permission,omitempty"`
	Stop       string   `json:"stop,omitempty"`
}

// seamOutcome is what must not depend on the seams.
type seamOutcome struct {
	Initialize   string     `json:"initialize"`
	Turn         seamTurn   `json:"turn"`
	Cancel       string     `json:"cancel"`
	Concurrent   []seamTurn `json:"concurrent"`
	Close        string     `json:"close"`
	Load         *seamTurn  `json:"load,omitempty"`
	Resume       *seamTurn  `json:"resume,omitempty"`
	Reinitialize string     `json:"reinitialize"`
	AfterReinit  seamTurn   `json:"afterReinit"`
	Idle         *seamTurn  `json:"idle,omitempty"`
}

// seamEditor is an editor of either version: requests and notifications
// by method, and every message it received from the bridge, in order.
type seamEditor interface {
	request(t *testing.T, method string, params any) (json.RawMessage, error)
	notify(t *testing.T, method string, params any)
	received() []gjson.Result
}

// TestSeamMatrix runs the suite in every cell; see the top of the file.
func TestSeamMatrix(t *testing.T) {
	NodeSDK(t)
	t.Parallel()
	cells := seamCells(t)
	// The reference cell sends its outcome, or closes ref when it failed.
	ref := make(chan seamOutcome, 1)
	var refOut seamOutcome
	var refOK bool
	var refOnce sync.Once
	want := func() (seamOutcome, bool) {
		refOnce.Do(func() { refOut, refOK = <-ref })
		return refOut, refOK
	}
	all := seamAllCells()
	var na []string
	for _, c := range all {
		if why := seamNA(c); why != "" {
			na = append(na, c.name()+": "+why)
		}
	}
	t.Logf("the product has %d cells, %d not applicable:\n\t%s", len(all), len(na), strings.Join(na, "\n\t"))
	var names []string
	for _, c := range cells {
		if seamNA(c) == "" {
			names = append(names, c.name()+map[bool]string{true: " (+ idle step)"}[c.idle])
		}
	}
	t.Logf("running %d cells (ACP_SEAM_MATRIX=full runs every applicable one):\n\t%s", len(names), strings.Join(names, "\n\t"))
	// Cells mostly wait on their processes: seamParallel of them run at a
	// time, whatever -parallel says (t.Run from goroutines, the reference
	// first; a cell waiting for the reference's outcome holds no slot).
	slots := make(chan struct{}, seamParallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, c := range cells {
		if seamNA(c) != "" {
			continue
		}
		isRef := c.name() == seamReference.name()
		var release sync.Once
		free := func() { release.Do(func() { <-slots }) }
		refRan := false
		run := func(t *testing.T) {
			refRan = refRan || isRef
			var got seamOutcome
			if isRef {
				defer func() {
					if t.Failed() {
						close(ref) // the others fail: nothing to compare with
						return
					}
					ref <- got
					b, _ := json.MarshalIndent(got, "", "  ")
					t.Logf("reference outcome:\n%s", b)
				}()
				got = seamSuite(t, c, seamStart(t, c))
				return
			}
			got = seamSuite(t, c, seamStart(t, c))
			free() // waiting for the reference takes no slot
			if t.Failed() {
				return // the step that failed says why
			}
			w, ok := want()
			if !ok {
				t.Fatalf("the reference cell %s failed or was not run (-run must select it too); nothing to compare with", seamReference.name())
			}
			seamCompare(t, c, got, w)
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer free()
			t.Run(c.name(), run)
			if isRef && !refRan {
				close(ref) // -run left it out
			}
		}()
	}
}

// seamCompare compares a cell's outcome with the reference's, step by step,
// leaving out the steps that cannot apply to the cell.
func seamCompare(t *testing.T, c seamCell, got, want seamOutcome) {
	t.Helper()
	// A deep copy: the reference's outcome is shared by every cell.
	b, _ := json.Marshal(want)
	want = seamOutcome{}
	_ = json.Unmarshal(b, &want)
	if why := seamStepNA(c, "permission"); why != "" {
		want.Turn.Permission, want.AfterReinit.Permission = "", ""
		for i := range want.Concurrent {
			want.Concurrent[i].Permission = ""
		}
		if want.Idle != nil {
			want.Idle.Permission = ""
		}
	}
	if seamStepNA(c, "reinitialize") != "" {
		want.Reinitialize = ""
	}
	if seamStepNA(c, "close") != "" {
		want.Close = ""
	}
	for _, step := range []string{"close", "load", "resume", "reinitialize"} {
		if why := seamStepNA(c, step); why != "" {
			t.Logf("step %s not applicable: %s", step, why)
		}
	}
	if !seamIdle(c) {
		want.Idle = nil
	}
	if seamStepNA(c, "load") != "" {
		want.Load, want.Resume = nil, nil
	}
	if reflect.DeepEqual(got, want) {
		return
	}
	// Each step that differs, as compact JSON.
	var g, w map[string]json.RawMessage
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	_ = json.Unmarshal(gb, &g)
	_ = json.Unmarshal(wb, &w)
	keys := map[string]bool{}
	for k := range g {
		keys[k] = true
	}
	for k := range w {
		keys[k] = true
	}
	var diffs []string
	for k := range keys {
		if string(g[k]) != string(w[k]) {
			diffs = append(diffs, fmt.Sprintf("%s: got %s, want %s", k, g[k], w[k]))
		}
	}
	sort.Strings(diffs)
	t.Errorf("outcome differs from the reference cell %s:\n\t%s", seamReference.name(), strings.Join(diffs, "\n\t"))
}

// seamStart starts the cell's agent, bridge(s) and editor.
func seamStart(t *testing.T, c seamCell) seamEditor {
	t.Helper()
	var flags []string
	if !c.sessions {
		flags = append(flags, "--no-sessions")
	}
	traceFile := ""
	if c.trace {
		traceFile = filepath.Join(t.TempDir(), "trace.ndjson")
		flags = append(flags, "--trace", traceFile)
		t.Cleanup(func() {
			// The trace is written as the bridge runs and complete when
			// it exits (before this cleanup, registered first, runs).
			st, err := os.Stat(traceFile)
			if err != nil || st.Size() == 0 {
				t.Errorf("--trace %s: nothing recorded (%v)", traceFile, err)
			}
		})
	}
	var childArgv, childEnv []string
	if c.transport != "ws" {
		childArgv, childEnv = c.backend.child(t)
	}
	var bridgeArgs, env []string
	switch c.transport {
	case "child":
		bridgeArgs = append(append(append(flags, c.backend.dialect...), "--"), childArgv...)
		env = childEnv
	case "ws":
		s := StartWSAgent(t, fakeagent.WSOptions{Serve: c.backend.ws})
		bridgeArgs = append(append(flags, c.backend.dialect...), "--url", s.URL)
	case "http", "b2b":
		var serveFlags []string
		if !c.sessions {
			serveFlags = append(serveFlags, "--no-sessions")
		}
		// serve refuses --trace: the front bridge traces (b2b).
		srv := StartServe(t, append(append(append(serveFlags, c.backend.dialect...), "--"), childArgv...), childEnv)
		if c.transport == "http" {
			return seamPuppet(t, c.editor, nil, nil, srv.Endpoint)
		}
		bridgeArgs = append(flags, "--url", srv.Endpoint)
	}
	if c.editor == 2 {
		return seamPuppet(t, 2, bridgeArgs, env, "")
	}
	return seamGoEditor(t, bridgeArgs, env)
}

// --- the suite ---------------------------------------------------------------------

const seamPrompt = "seam"

func seamSuite(t *testing.T, c seamCell, ed seamEditor) seamOutcome {
	var out seamOutcome
	v := c.editor
	init := func() string {
		res, err := ed.request(t, "initialize", seamInitParams(v))
		if err != nil {
			t.Fatalf("initialize: %v", err)
		}
		if got := gjson.GetBytes(res, "protocolVersion").Int(); got != int64(v) {
			return fmt.Sprintf("protocolVersion %d", got)
		}
		return "ok"
	}
	out.Initialize = init()
	cwd := t.TempDir()
	newSession := func() string {
		res, err := ed.request(t, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
		if err != nil {
			t.Fatalf("session/new: %v", err)
		}
		return gjson.GetBytes(res, "sessionId").Str
	}
	a, b, cc, d := newSession(), newSession(), newSession(), newSession()

	out.Turn = seamPromptTurn(t, ed, v, a, seamPrompt)
	out.Cancel = seamCancel(t, ed, v, d, c.backend.cancelWord)

	var wg sync.WaitGroup
	turns := make([]seamTurn, 2)
	for i, sid := range []string{b, cc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turns[i] = seamPromptTurn(t, ed, v, sid, seamPrompt)
		}()
	}
	wg.Wait()
	out.Concurrent = turns
	sort.Slice(turns, func(i, j int) bool {
		bi, _ := json.Marshal(turns[i])
		bj, _ := json.Marshal(turns[j])
		return string(bi) < string(bj)
	})

	closeA := func() string {
		if _, err := ed.request(t, "session/close", map[string]any{"sessionId": a}); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	}
	if seamStepNA(c, "close") == "" {
		out.Close = closeA()
	}
	if seamStepNA(c, "load") == "" {
		mark := len(ed.received())
		method, params := "session/load", map[string]any{"sessionId": a, "cwd": cwd, "mcpServers": []any{}}
		if v == 2 {
			method = "session/resume"
			params["replayFrom"] = map[string]any{"type": "start"}
		}
		if _, err := ed.request(t, method, params); err != nil {
			t.Errorf("%s: %v", method, err)
		} else {
			r := seamNormalize(ed.received()[mark:], a, true)
			out.Load = &r
		}
		if got := closeA(); got != "ok" {
			t.Errorf("session/close after the load: %s", got)
		}
		mark = len(ed.received())
		if _, err := ed.request(t, "session/resume", map[string]any{"sessionId": a, "cwd": cwd, "mcpServers": []any{}}); err != nil {
			t.Errorf("session/resume: %v", err)
		} else {
			r := seamNormalize(ed.received()[mark:], a, true)
			out.Resume = &r
		}
	} else {
		// The session stays closed; the turns below use another.
		a = newSession()
	}

	if seamStepNA(c, "reinitialize") == "" {
		out.Reinitialize = init()
	}
	out.AfterReinit = seamPromptTurn(t, ed, v, a, seamPrompt)
	if seamIdle(c) {
		time.Sleep(linkIdle)
		tr := seamPromptTurn(t, ed, v, a, seamPrompt)
		out.Idle = &tr
	}
	return out
}

func seamInitParams(v int) map[string]any {
	if v == 2 {
		return map[string]any{"protocolVersion": 2, "info": map[string]any{"name": "seam-editor", "version": "0.0.0"}, "capabilities": map[string]any{}}
	}
	return map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]any{"readTextFile": true, "writeTextFile": true}, "terminal": true},
		"clientInfo":         map[string]any{"name": "seam-editor", "version": "0.0.0"},
	}
}

// seamPromptTurn runs one prompt to its end and normalizes it.
func seamPromptTurn(t *testing.T, ed seamEditor, v int, sid, text string) seamTurn {
	t.Helper()
	mark := len(ed.received())
	res, err := ed.request(t, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		t.Errorf("session/prompt %q in %s: %v", text, sid, err)
		return seamTurn{Stop: "error"}
	}
	stop := gjson.GetBytes(res, "stopReason").Str
	if v == 2 {
		stop = seamWaitIdle(t, ed, sid, mark).Get("params.update.stopReason").Str
	}
	tr := seamNormalize(ed.received()[mark:], sid, false)
	tr.Stop = stop
	return tr
}

// seamWaitIdle waits for session sid's idle state_update after a running
// one, from message mark on; it may run off the test's goroutine, so it
// fails with Errorf and an empty result.
func seamWaitIdle(t *testing.T, ed seamEditor, sid string, mark int) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(seamWait)
	for {
		running := false
		for _, m := range ed.received()[mark:] {
			if m.Get("method").Str != "session/update" || m.Get("params.sessionId").Str != sid {
				continue
			}
			u := m.Get("params.update")
			if u.Get("sessionUpdate").Str != "state_update" {
				continue
			}
			switch u.Get("state").Str {
			case "running":
				running = true
			case "idle":
				if running {
					return m
				}
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("session %s: no idle state_update after running within %v", sid, seamWait)
			return gjson.Result{}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// seamCancel starts a turn that runs until cancelled, cancels it once the
// agent has said something, and returns its stop reason.
func seamCancel(t *testing.T, ed seamEditor, v int, sid, word string) string {
	t.Helper()
	mark := len(ed.received())
	type answer struct {
		res json.RawMessage
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := ed.request(t, "session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": word}}})
		done <- answer{res, err}
	}()
	waitUntil(t, seamWait, "the cancelled turn's first words", func() bool {
		return seamNormalize(ed.received()[mark:], sid, false).Text != ""
	})
	ed.notify(t, "session/cancel", map[string]any{"sessionId": sid})
	var a answer
	select {
	case a = <-done:
	case <-time.After(seamWait):
		t.Fatalf("the cancelled prompt was not answered within %v", seamWait)
	}
	if a.err != nil {
		return "error: " + a.err.Error()
	}
	if v == 2 {
		return seamWaitIdle(t, ed, sid, mark).Get("params.update.stopReason").Str
	}
	return gjson.GetBytes(a.res, "stopReason").Str
}

// seamNormalize reduces session sid's messages among msgs to a seamTurn:
// the agent's text (v2: each message's chunks, or its last whole-message
// upsert), the user's (replays only), each tool call's final status in
// the order the calls began, and the kind of the option the editor chose
// for each permission request.
func seamNormalize(msgs []gjson.Result, sid string, withUser bool) seamTurn {
	type message struct {
		id   string
		text string
		user bool
	}
	var order []*message
	byID := map[string]*message{}
	var last *message
	tools := map[string]string{}
	var toolOrder []string
	var perms []string
	msgFor := func(id string, user bool) *message {
		if id == "" {
			// v1: consecutive chunks of one kind are one message.
			if last != nil && last.id == "" && last.user == user {
				return last
			}
		} else if m := byID[id]; m != nil {
			return m
		}
		m := &message{id: id, user: user}
		if id != "" {
			byID[id] = m
		}
		order = append(order, m)
		return m
	}
	for _, m := range msgs {
		if m.Get("params.sessionId").Str != sid {
			continue
		}
		switch m.Get("method").Str {
		case "session/request_permission":
			perms = append(perms, "asked")
			continue
		case "session/update":
		default:
			continue
		}
		u := m.Get("params.update")
		kind := u.Get("sessionUpdate").Str
		switch kind {
		case "agent_message_chunk", "user_message_chunk":
			msg := msgFor(u.Get("messageId").Str, kind == "user_message_chunk")
			msg.text += u.Get("content.text").Str
			last = msg
		case "agent_message", "user_message":
			msg := msgFor(u.Get("messageId").Str, kind == "user_message")
			if c := u.Get("content"); c.Exists() {
				var s strings.Builder
				for _, b := range c.Array() {
					s.WriteString(b.Get("text").Str)
				}
				msg.text = s.String()
			}
			last = msg
		case "tool_call", "tool_call_update":
			id := u.Get("toolCallId").Str
			if _, seen := tools[id]; !seen {
				toolOrder = append(toolOrder, id)
				tools[id] = "pending"
			}
			if s := u.Get("status").Str; s != "" {
				tools[id] = s
			}
			last = nil
		default:
			if kind != "state_update" {
				last = nil
			}
		}
	}
	var tr seamTurn
	for _, m := range order {
		if m.user {
			if withUser {
				tr.User += m.text
			}
			continue
		}
		tr.Text += m.text
	}
	tr.Tools = []string{}
	for _, id := range toolOrder {
		tr.Tools = append(tr.Tools, tools[id])
	}
	if len(perms) > 0 {
		// Both editors choose the option of kind allow_once.
		tr.Permission = fmt.Sprintf("%d×allow_once", len(perms))
	}
	return tr
}

// --- the v1 editor: acp-go-sdk on the bridge's stdio -------------------------------

type seamGo struct {
	e *Editor
}

func seamGoEditor(t *testing.T, args, env []string) seamEditor {
	tr := Transport{Name: "seam", Start: func(t *testing.T) Agent { return Agent{Args: args, Env: env} }}
	return &seamGo{e: NewEditor(t, tr, EditorOptions{})}
}

func seamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), seamWait)
	t.Cleanup(cancel)
	return ctx
}

// seamCall converts params to the SDK's request type, calls it and returns
// the answer as JSON.
func seamCall[Req, Res any](t *testing.T, params any, call func(context.Context, Req) (Res, error)) (json.RawMessage, error) {
	var req Req
	b, _ := json.Marshal(params)
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("params %s: %w", b, err)
	}
	res, err := call(seamCtx(t), req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

func (g *seamGo) request(t *testing.T, method string, params any) (json.RawMessage, error) {
	c := g.e.Conn
	switch method {
	case "initialize":
		return seamCall(t, params, c.Initialize)
	case "session/new":
		return seamCall(t, params, c.NewSession)
	case "session/prompt":
		return seamCall(t, params, c.Prompt)
	case "session/load":
		return seamCall(t, params, c.LoadSession)
	case "session/resume":
		return seamCall(t, params, c.ResumeSession)
	case "session/close":
		return seamCall(t, params, c.CloseSession)
	}
	return nil, fmt.Errorf("the v1 editor has no request %s", method)
}

func (g *seamGo) notify(t *testing.T, method string, params any) {
	if method != "session/cancel" {
		t.Errorf("the v1 editor has no notification %s", method)
		return
	}
	var n acp.CancelNotification
	b, _ := json.Marshal(params)
	_ = json.Unmarshal(b, &n)
	if err := g.e.Conn.Cancel(seamCtx(t), n); err != nil {
		t.Errorf("session/cancel: %v", err)
	}
}

func (g *seamGo) received() []gjson.Result {
	var out []gjson.Result
	for _, l := range g.e.Out.Lines() {
		if l.Method() != "" {
			out = append(out, gjson.ParseBytes(l.Raw))
		}
	}
	return out
}

// --- the SDK editor: the TypeScript SDK, a puppet on a control socket -------------

type seamNode struct {
	conn net.Conn
	w    *bufio.Writer

	mu      sync.Mutex
	msgs    []gjson.Result
	next    int
	waiting map[int]chan gjson.Result
	failed  string
}

// seamPuppet starts testdata/seameditor/editor.mjs speaking ACP version v:
// on the stdio of a bridge started with args and env, or, with url, to
// that Streamable HTTP endpoint (then every message it receives is
// validated here).
func seamPuppet(t *testing.T, v int, args, env []string, url string) seamEditor {
	t.Helper()
	argv := NodeScript(t, "testdata/seameditor/editor.mjs")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = hermeticEnv(t, []string{"SEAM_CONTROL=" + ln.Addr().String(), fmt.Sprintf("SEAM_VERSION=%d", v)})
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	var check func(msg string)
	var b *Bridge
	if url != "" {
		cmd.Env = append(cmd.Env, "SEAM_URL="+url)
		in := &EditorInput{w: nopWriteCloser{}, sent: map[string][]string{}}
		val := newValidator(in)
		if v == 2 {
			s, err := acpschema.LoadSchemaV2()
			if err != nil {
				t.Fatal(err)
			}
			val.v2 = s
		}
		var mu sync.Mutex
		check = func(line string) {
			mu.Lock()
			defer mu.Unlock()
			dir, msg, _ := strings.Cut(line, " ")
			if dir == ">" {
				in.Write([]byte(msg + "\n"))
				return
			}
			for _, p := range val.check([]byte(msg + "\n")) {
				t.Errorf("over Streamable HTTP: %s\n\tmessage: %s", p, truncate(msg, 600))
			}
		}
	} else {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		b = StartBridge(t, args, env, pw)
		if v == 2 {
			b.SpeaksV2(t)
		}
		cmd.Stdin = pr
		cmd.Stdout = b.In
		t.Cleanup(func() { pr.Close(); pw.Close() })
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(2 * sdkWait))
	conn, err := ln.Accept()
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("the SDK editor never connected: %v\n%s", err, stderr.String())
	}
	n := &seamNode{conn: conn, w: bufio.NewWriter(conn), waiting: map[int]chan gjson.Result{}}
	readerDone := make(chan struct{})
	go n.read(check, readerDone)
	t.Cleanup(func() {
		n.send(map[string]any{"op": "end"})
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("the SDK editor did not exit within 10 s of its end")
		}
		conn.Close()
		<-readerDone
		if f := n.failure(); f != "" {
			t.Errorf("the SDK editor failed: %s", f)
		}
		if b != nil {
			b.In.Close()
		}
		if t.Failed() {
			t.Logf("SDK editor stderr:\n%s", tail(stderr.String(), 16<<10))
		}
	})
	return n
}

func (n *seamNode) read(check func(string), done chan struct{}) {
	defer close(done)
	sc := bufio.NewScanner(n.conn)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		m := gjson.ParseBytes(append([]byte(nil), sc.Bytes()...))
		n.mu.Lock()
		switch {
		case m.Get("event").Str == "recv":
			msg := m.Get("msg")
			n.msgs = append(n.msgs, msg)
			if check != nil {
				check("< " + msg.Raw)
			}
		case m.Get("event").Str == "sent":
			if check != nil {
				check("> " + m.Get("msg").Raw)
			}
		case m.Get("event").Str == "error":
			n.failed = m.Get("message").Str
		case m.Get("id").Exists():
			if ch := n.waiting[int(m.Get("id").Int())]; ch != nil {
				ch <- m
			}
		}
		n.mu.Unlock()
	}
}

func (n *seamNode) failure() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.failed
}

func (n *seamNode) send(cmd map[string]any) {
	b, _ := json.Marshal(cmd)
	n.mu.Lock()
	defer n.mu.Unlock()
	_, _ = n.w.Write(append(b, '\n'))
	_ = n.w.Flush()
}

func (n *seamNode) call(t *testing.T, op, method string, params any) gjson.Result {
	t.Helper()
	n.mu.Lock()
	n.next++
	id := n.next
	ch := make(chan gjson.Result, 1)
	n.waiting[id] = ch
	n.mu.Unlock()
	n.send(map[string]any{"id": id, "op": op, "method": method, "params": params})
	select {
	case r := <-ch:
		return r
	case <-time.After(sdkWait):
		// Errorf: requests run off the test's goroutine too. The wait is
		// sdkWait: a node agent behind a bridge may take long to start on
		// a loaded machine.
		t.Errorf("the SDK editor's %s %s got no answer within %v (editor failure: %q)", op, method, sdkWait, n.failure())
		return gjson.Parse(`{"error":{"code":-1,"message":"no answer from the SDK editor"}}`)
	}
}

func (n *seamNode) request(t *testing.T, method string, params any) (json.RawMessage, error) {
	r := n.call(t, "request", method, params)
	if e := r.Get("error"); e.Exists() {
		return nil, errors.New(e.Raw)
	}
	return json.RawMessage(r.Get("result").Raw), nil
}

func (n *seamNode) notify(t *testing.T, method string, params any) {
	if e := n.call(t, "notify", method, params).Get("error"); e.Exists() {
		t.Errorf("%s: %s", method, e.Raw)
	}
}

func (n *seamNode) received() []gjson.Result {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.msgs)
}

package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// CompareOptions configure Compare.
type CompareOptions struct {
	// A and B reach the two agents.
	A, B Dialer
	// Prompts are sent in order on one session. A prompt starting with
	// CancelPrefix is sent without the prefix and cancelled after its
	// first update (or CancelAfter).
	Prompts []string
	// Timeout, Quiet, CancelAfter and Cwd as in Options.
	Timeout, Quiet, CancelAfter time.Duration
	Cwd                         string
	// Text compares the merged message and thought text too; by default
	// only the shape of the turns is compared, as two agents (or two runs
	// of one model) rarely say the same words.
	Text bool
	// LatencyTolerance, when positive, reports as a difference a latency
	// (to first update, to end of turn) that differs by more than this;
	// otherwise latencies are only reported.
	LatencyTolerance time.Duration
	// TraceDir, when set, keeps each side's wire transcript as a trace
	// file, DIR/a.ndjson and DIR/b.ndjson (see Options.TraceDir).
	TraceDir string
	// AProtocol and BProtocol are the ACP versions spoken to A and B: 1
	// (when zero) or 2. When either is 2 the turns are compared by their
	// outcomes (v2compare.go), which both versions can express.
	AProtocol, BProtocol int
}

// CancelPrefix marks a prompt compare cancels.
const CancelPrefix = "!cancel "

// Recording is one agent's normalised session.
type Recording struct {
	Agent string `json:"agent"`
	// Error is set when the session could not be played to the end.
	Error string `json:"error,omitempty"`
	// Capabilities are the initialize result's protocolVersion and
	// agentCapabilities, and session/new's modes, flattened to path=value.
	Capabilities []string `json:"capabilities"`
	// Setup are the events between initialize and the first prompt:
	// updates sent before session/new was answered ("early …") and those
	// sent after it, such as the available commands.
	Setup []string `json:"setup"`
	Turns []Turn   `json:"turns"`
}

// Turn is one prompt's normalised turn.
type Turn struct {
	Prompt string `json:"prompt"`
	// Events are the turn's updates and agent→client requests in order,
	// consecutive chunks of one kind merged, ids renumbered (tc1, tc2…).
	Events     []string `json:"events"`
	StopReason string   `json:"stop_reason,omitempty"`
	// ErrorCode is the prompt's error code when it failed.
	ErrorCode   int64         `json:"error_code,omitempty"`
	FirstUpdate time.Duration `json:"first_update_ns"`
	End         time.Duration `json:"end_ns"`
}

// Difference is one way the agents differ.
type Difference struct {
	Area string `json:"area"`
	A    string `json:"a"`
	B    string `json:"b"`
}

// Comparison is Compare's result.
type Comparison struct {
	A           Recording    `json:"a"`
	B           Recording    `json:"b"`
	Differences []Difference `json:"differences"`
}

// Compare plays the same session against both agents at once and reports
// the differences after normalisation.
func Compare(ctx context.Context, o CompareOptions) (*Comparison, error) {
	if o.A == nil || o.B == nil {
		return nil, fmt.Errorf("compare: two agents are needed")
	}
	for _, v := range []int{o.AProtocol, o.BProtocol} {
		if v < 0 || v > 2 {
			return nil, fmt.Errorf("compare: protocol version %d: compare speaks ACP 1 and 2", v)
		}
	}
	// A session of turns normalised to their shape, in v1; when either
	// side speaks v2, the turns' outcomes (v2compare.go).
	play := (*run).record
	if o.AProtocol == 2 || o.BProtocol == 2 {
		play = (*run).recordOutcomes
	}
	base := Options{Timeout: o.Timeout, Quiet: o.Quiet, CancelAfter: o.CancelAfter, Cwd: o.Cwd, TraceDir: o.TraceDir}
	cleanup, err := base.defaults()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var c Comparison
	var wg sync.WaitGroup
	for _, side := range []struct {
		name     string
		d        Dialer
		protocol int
		rec      *Recording
	}{{"a", o.A, o.AProtocol, &c.A}, {"b", o.B, o.BProtocol, &c.B}} {
		proto := protocolOf(side.protocol)
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := base
			opts.Dialer = side.d
			*side.rec = playSide(withScenario(ctx, side.name), &opts, proto, func(r *run, rec *Recording) { play(r, rec, o) })
		}()
	}
	wg.Wait()
	c.Differences = diff(&c.A, &c.B, o)
	return &c, nil
}

// playSide dials one side of a comparison and plays its session with
// play, keeping the transcript under opts.TraceDir when set.
func playSide(ctx context.Context, opts *Options, proto *protocol, play func(*run, *Recording)) Recording {
	rec := Recording{Agent: opts.Dialer.String(), Capabilities: []string{}, Setup: []string{}, Turns: []Turn{}}
	p, err := dialPeer(ctx, opts)
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	defer p.close()
	play(&run{peer: p, proto: proto}, &rec)
	if opts.TraceDir != "" {
		if err := writeTranscript(opts.TraceDir, scenarioOf(ctx), p.start, p.messages()); err != nil && rec.Error == "" {
			rec.Error = err.Error()
		}
	}
	return rec
}

// record plays o's session in v1 and records its capabilities, its setup
// and the shape of each turn.
func (r *run) record(rec *Recording, o CompareOptions) {
	m, err := r.call("initialize", initParams(1))
	if err != nil {
		rec.Error = err.Error()
		return
	}
	if m.IsError() {
		rec.Capabilities = append(rec.Capabilities, fmt.Sprintf("initialize error=%d", m.Get("error.code").Int()))
		return
	}
	flatten("protocolVersion", m.Get("result.protocolVersion"), &rec.Capabilities)
	flatten("agentCapabilities", m.Get("result.agentCapabilities"), &rec.Capabilities)
	from := len(r.messages())
	nm, err := r.newSession()
	if err != nil {
		rec.Error = err.Error()
		return
	}
	r.settle()
	ids := map[string]string{} // toolCallId → tcN
	for _, m := range r.messages()[from:] {
		if m.Out || !m.IsNotification() && !m.IsRequest() {
			continue
		}
		ev := "notification " + m.method
		switch {
		case m.method == "session/update":
			ev, _, _ = updateEvent(m.Get("params.update"), ids)
			if sid := m.Get("params.sessionId").Str; sid != r.sid {
				ev += " for another session"
			}
		case m.IsRequest():
			ev = "request " + m.method
		}
		if m.N < nm.N {
			ev = "early " + ev
		}
		rec.Setup = append(rec.Setup, ev)
	}
	var modes []string
	for _, md := range nm.Get("result.modes.availableModes").Array() {
		modes = append(modes, md.Get("id").Str)
	}
	if len(modes) > 0 {
		rec.Capabilities = append(rec.Capabilities, "modes="+strings.Join(modes, ","))
	}
	sort.Strings(rec.Capabilities)
	for _, text := range o.Prompts {
		turn, err := r.turn(text, ids)
		rec.Turns = append(rec.Turns, turn)
		if err != nil {
			rec.Error = err.Error()
			return
		}
	}
}

// turn plays one prompt and normalises what happened.
func (r *run) turn(text string, ids map[string]string) (Turn, error) {
	cancel := strings.HasPrefix(text, CancelPrefix)
	t := Turn{Prompt: text, Events: []string{}}
	start := len(r.messages())
	id, err := r.request("session/prompt", textPrompt(r.sid, strings.TrimPrefix(text, CancelPrefix)))
	if err != nil {
		return t, err
	}
	// Latencies count from the moment the prompt was written (its
	// transcript time), not from when Send returned: the agent may answer
	// before that.
	var sent time.Duration
	for _, m := range r.messages()[start:] {
		if m.Out && m.id == id {
			sent = m.At
			break
		}
	}
	if cancel {
		m, err := r.await(r.opts.CancelAfter, func(m Msg) bool { return isUpdate(m, r.sid) || (m.IsResponse() && m.id == id) })
		if err == nil && m.IsResponse() {
			t.Events = append(t.Events, "(ended before the cancel)")
		}
		_, _ = r.notify("session/cancel", map[string]any{"sessionId": r.sid})
		r.holdPermissions = true
		r.answerHeld()
	}
	resp, err := r.awaitCancelled(r.opts.Timeout, func(m Msg) bool { return m.IsResponse() && m.id == id })
	r.holdPermissions = false
	if err != nil {
		return t, fmt.Errorf("prompt %q: %s", text, waitErr("no answer", err))
	}
	r.settle()
	t.End = resp.At - sent
	if resp.IsError() {
		t.ErrorCode = resp.Get("error.code").Int()
	}
	t.StopReason = resp.Get("result.stopReason").Str
	// A chunk event holds "\x00N", N indexing texts, until the merged text
	// is complete.
	var texts []*strings.Builder
	lastChunk := "" // the kind of the previous event when it was a chunk
	add := func(ev string) {
		t.Events = append(t.Events, ev)
		lastChunk = ""
	}
	for _, m := range r.messages()[start:] {
		if m.Out {
			continue
		}
		late := ""
		if m.N > resp.N {
			late = "late "
		}
		switch {
		case isUpdate(m, r.sid):
			if t.FirstUpdate == 0 && late == "" {
				t.FirstUpdate = m.At - sent
			}
			kind, chunk, txt := updateEvent(m.Get("params.update"), ids)
			ev := late + kind
			if !chunk {
				add(ev)
				continue
			}
			if ev != lastChunk {
				add(fmt.Sprintf("%s\x00%d", ev, len(texts)))
				texts = append(texts, &strings.Builder{})
				lastChunk = ev
			}
			texts[len(texts)-1].WriteString(txt)
		case m.IsRequest():
			ev := late + "request " + m.method
			if m.method == "session/request_permission" {
				var kinds []string
				for _, op := range m.Get("params.options").Array() {
					kinds = append(kinds, op.Get("kind").Str)
				}
				ev += fmt.Sprintf(" %s options=%s", toolID(m.Get("params.toolCall.toolCallId").Str, ids), strings.Join(kinds, ","))
			}
			add(ev)
		case m.IsNotification() && m.method != "session/update":
			add(late + "notification " + m.method)
		}
	}
	// Chunk events carry an index into texts; render them now that the
	// merged text is complete.
	for i, ev := range t.Events {
		if k, n, ok := strings.Cut(ev, "\x00"); ok {
			var idx int
			fmt.Sscan(n, &idx)
			t.Events[i] = k + " " + strconvQuote(texts[idx].String())
		}
	}
	return t, nil
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// updateEvent names an update: its kind plus the fields that make up the
// protocol's shape (tool call kind and status, plan size, mode id). chunk
// reports a message/thought chunk, whose text is txt.
func updateEvent(u gjson.Result, ids map[string]string) (ev string, chunk bool, txt string) {
	kind := u.Get("sessionUpdate").Str
	if kind == "" {
		if at := u.Get("@type"); at.Exists() {
			kind = "@type=" + at.Str
		} else {
			kind = "(no sessionUpdate)"
		}
	}
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk", "user_message_chunk":
		c := u.Get("content")
		if c.Get("type").Str == "text" {
			return kind, true, c.Get("text").Str
		}
		return kind + " " + c.Get("type").Str, false, ""
	case "tool_call", "tool_call_update":
		ev := kind + " " + toolID(u.Get("toolCallId").Str, ids)
		for _, f := range []string{"kind", "status"} {
			if v := u.Get(f); v.Exists() {
				ev += " " + f + "=" + v.Str
			}
		}
		return ev, false, ""
	case "plan":
		return fmt.Sprintf("plan entries=%d", len(u.Get("entries").Array())), false, ""
	case "current_mode_update":
		return kind + " " + u.Get("currentModeId").Str, false, ""
	}
	return kind, false, ""
}

func toolID(id string, ids map[string]string) string {
	if id == "" {
		return "tc?"
	}
	if n, ok := ids[id]; ok {
		return n
	}
	n := fmt.Sprintf("tc%d", len(ids)+1)
	ids[id] = n
	return n
}

// flatten appends path=value for every leaf of v. An empty object is a
// leaf ("sessionCapabilities.close={}" advertises session/close); false
// and null are left out, as the spec reads an absent capability and an
// explicit false alike, and so is an object of nothing but those.
func flatten(path string, v gjson.Result, out *[]string) {
	switch {
	case !v.Exists(), v.Type == gjson.Null, v.Type == gjson.False:
	case v.IsObject() && len(v.Map()) > 0:
		v.ForEach(func(k, x gjson.Result) bool {
			flatten(path+"."+k.Str, x, out)
			return true
		})
	case v.IsObject():
		// A member's empty object is a marker; the root's says nothing.
		if strings.Contains(path, ".") {
			*out = append(*out, path+"={}")
		}
	default:
		*out = append(*out, path+"="+v.Raw)
	}
}

// diff lists the differences between two recordings.
func diff(a, b *Recording, o CompareOptions) []Difference {
	ds := []Difference{}
	if a.Error != "" || b.Error != "" {
		if a.Error != b.Error {
			ds = append(ds, Difference{"session", orDash(a.Error), orDash(b.Error)})
		}
	}
	ca, cb := setOf(a.Capabilities), setOf(b.Capabilities)
	for _, k := range union(a.Capabilities, b.Capabilities) {
		if !ca[k] || !cb[k] {
			ds = append(ds, Difference{"capabilities", present(ca[k], k), present(cb[k], k)})
		}
	}
	for _, d := range eventDiff(a.Setup, b.Setup) {
		ds = append(ds, Difference{"session setup", d[0], d[1]})
	}
	for i := 0; i < max(len(a.Turns), len(b.Turns)); i++ {
		if i >= len(a.Turns) || i >= len(b.Turns) {
			ds = append(ds, Difference{fmt.Sprintf("turn %d", i+1), fmt.Sprintf("%d turns played", len(a.Turns)), fmt.Sprintf("%d turns played", len(b.Turns))})
			break
		}
		ta, tb := a.Turns[i], b.Turns[i]
		where := fmt.Sprintf("turn %d %q", i+1, ta.Prompt)
		ea, eb := ta.Events, tb.Events
		if !o.Text {
			ea, eb = shapes(ea), shapes(eb)
		}
		for _, d := range eventDiff(ea, eb) {
			ds = append(ds, Difference{where + " updates", d[0], d[1]})
		}
		if ta.StopReason != tb.StopReason {
			ds = append(ds, Difference{where + " stopReason", orDash(ta.StopReason), orDash(tb.StopReason)})
		}
		if ta.ErrorCode != tb.ErrorCode {
			ds = append(ds, Difference{where + " error code", codeText(ta.ErrorCode), codeText(tb.ErrorCode)})
		}
		if tol := o.LatencyTolerance; tol > 0 {
			if absDur(ta.FirstUpdate-tb.FirstUpdate) > tol {
				ds = append(ds, Difference{where + " latency to first update", ta.FirstUpdate.String(), tb.FirstUpdate.String()})
			}
			if absDur(ta.End-tb.End) > tol {
				ds = append(ds, Difference{where + " latency to end of turn", ta.End.String(), tb.End.String()})
			}
		}
	}
	return ds
}

// shapes drops the merged text from chunk events.
func shapes(evs []string) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		if k, _, ok := strings.Cut(e, " \""); ok && strings.HasSuffix(k, "_chunk") {
			e = k
		}
		out[i] = e
	}
	return out
}

// eventDiff aligns two event lists (longest common subsequence) and
// returns each unmatched event as {a, b}, "-" on the side that lacks it.
func eventDiff(a, b []string) [][2]string {
	n, m := len(a), len(b)
	l := make([][]int, n+1)
	for i := range l {
		l[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	var out [][2]string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			i++
			j++
		case j >= m || (i < n && l[i+1][j] >= l[i][j+1]):
			out = append(out, [2]string{fmt.Sprintf("#%d %s", i+1, a[i]), "-"})
			i++
		default:
			out = append(out, [2]string{"-", fmt.Sprintf("#%d %s", j+1, b[j])})
			j++
		}
	}
	return out
}

func setOf(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func union(a, b []string) []string {
	m := setOf(a)
	out := append([]string(nil), a...)
	for _, x := range b {
		if !m[x] {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

func present(ok bool, k string) string {
	if ok {
		return k
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func codeText(c int64) string {
	if c == 0 {
		return "-"
	}
	return fmt.Sprint(c)
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// WriteText prints both recordings' turns with their latencies and then
// the differences.
func (c *Comparison) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "acp-bridge compare\n  A: %s\n  B: %s\n", c.A.Agent, c.B.Agent)
	for i := 0; i < max(len(c.A.Turns), len(c.B.Turns)); i++ {
		for _, side := range []struct {
			name string
			rec  *Recording
		}{{"A", &c.A}, {"B", &c.B}} {
			if i >= len(side.rec.Turns) {
				continue
			}
			t := side.rec.Turns[i]
			end := t.StopReason
			if t.ErrorCode != 0 {
				end = fmt.Sprintf("error %d", t.ErrorCode)
			}
			first := "-"
			if t.FirstUpdate > 0 {
				first = t.FirstUpdate.Round(100 * time.Microsecond).String()
			}
			fmt.Fprintf(w, "turn %d %s: %d events, %s; first update %s, end of turn %s\n", i+1, side.name, len(t.Events), end,
				first, t.End.Round(100*time.Microsecond))
		}
	}
	for _, side := range []*Recording{&c.A, &c.B} {
		if side.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", side.Agent, side.Error)
		}
	}
	if c.Incomplete() {
		fmt.Fprintln(w, "a session could not be played to the end: nothing after that point was compared")
	}
	if len(c.Differences) == 0 {
		msg := "no differences"
		if c.Incomplete() {
			msg = "no differences in what was played"
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	fmt.Fprintf(w, "%d difference(s):\n", len(c.Differences))
	for _, d := range c.Differences {
		fmt.Fprintf(w, "  %s\n    A: %s\n    B: %s\n", d.Area, d.A, d.B)
	}
	return nil
}

// Incomplete reports whether either agent's session stopped early (it
// could not start, did not answer, or broke): a comparison that proves
// nothing about what was not played, so never a pass.
func (c *Comparison) Incomplete() bool { return c.A.Error != "" || c.B.Error != "" }

// WriteJSON writes the comparison as one JSON document; "incomplete" is
// true when a session could not be played to the end.
func (c *Comparison) WriteJSON(w io.Writer) error {
	out := struct {
		*Comparison
		Incomplete bool `json:"incomplete"`
	}{c, c.Incomplete()}
	return writeJSON(w, out)
}

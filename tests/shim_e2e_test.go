package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent/flawed"
)

// The compliance shim end to end: the built binary in front of the flawed
// agent (tests/fakeagent/flawed) with one defect switched on, once with the
// rule that repairs it on and once with only that rule off. The editor is
// raw lines, not the acp-go-sdk client: the defects are about bytes and
// order on the wire (an update one line too early, an id:null answer, a
// snake_case key), which the SDK would hide, drop or fail on before a test
// could look. Every stdout line is schema-checked by StartBridge; the rule-
// off runs take the violations the defect causes (TakeProblems) as part of
// what they assert.

// TakeProblems returns the wire violations seen so far and forgets them, for
// a test that expects the bridge to pass a defect through.
func (s *Stdout) TakeProblems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.problems
	s.problems = nil
	return p
}

// shimRun is one bridge in front of the flawed agent, driven by raw lines.
type shimRun struct {
	t      *testing.T
	b      *Bridge
	next   int
	report string
	rep    *shimReport // once finished
}

// startFlawed runs the bridge with --shim report=FILE and flags in front of
// the flawed agent with defects switched on. config, if not empty, is the
// text of a config file given with --config.
func startFlawed(t *testing.T, defects, config string, flags ...string) *shimRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &shimRun{t: t, report: filepath.Join(dir, "report.json")}
	args := []string{"--shim", "report=" + r.report}
	if slices.Contains(flags, "--shim") {
		args, r.report = nil, "" // the caller's --shim replaces the report
	}
	if config != "" {
		path := filepath.Join(dir, "config.hcl")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	args = append(append(args, flags...), "--", exe)
	r.b = StartBridge(t, args, []string{"FAKE_AGENT=flawed", "FLAWED_DEFECTS=" + defects}, nil)
	return r
}

// send writes a request and returns its raw id.
func (r *shimRun) send(method, params string) string {
	r.next++
	id := fmt.Sprint(r.next)
	r.b.WriteLine(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
	return id
}

func (r *shimRun) notify(method, params string) {
	r.b.WriteLine(`{"jsonrpc":"2.0","method":"` + method + `","params":` + params + `}`)
}

// call sends a request and waits for its answer.
func (r *shimRun) call(method, params string) Line {
	r.t.Helper()
	return r.b.Out.Response(r.t, r.send(method, params))
}

// within waits up to d for the answer to id; ok false if none came.
func (r *shimRun) within(id string, d time.Duration) (Line, bool) {
	return r.b.Out.Find(d, func(l Line) bool { return l.IsResponse() && l.ID() == id })
}

const noCaps = `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}`

func (r *shimRun) initialize(params string) Line {
	r.t.Helper()
	return r.call("initialize", params)
}

// open initializes (no client capabilities) and creates a session.
func (r *shimRun) open() string {
	r.t.Helper()
	if l := r.initialize(noCaps); l.Get("error").Exists() {
		r.t.Fatalf("initialize failed: %s", l)
	}
	l := r.call("session/new", `{"cwd":`+quoteJSON(r.t.TempDir())+`,"mcpServers":[]}`)
	sid := l.Get("result.sessionId").Str
	if sid == "" {
		r.t.Fatalf("session/new answered %s", l)
	}
	return sid
}

func (r *shimRun) prompt(sid, text string) string {
	return r.send("session/prompt", `{"sessionId":"`+sid+`","prompt":[{"type":"text","text":`+quoteJSON(text)+`}]}`)
}

// index returns the position of the first line matching m, or -1.
func (r *shimRun) index(m func(Line) bool) int {
	for _, l := range r.b.Out.Lines() {
		if m(l) {
			return l.N
		}
	}
	return -1
}

// finish closes the editor's side, waits for the bridge to exit and returns
// the report it wrote.
func (r *shimRun) finish() shimReport {
	r.t.Helper()
	if r.rep != nil {
		return *r.rep
	}
	r.b.In.Close()
	if _, ok := r.b.WaitExit(15 * time.Second); !ok {
		r.t.Fatalf("bridge did not exit after stdin EOF")
	}
	if r.report == "" {
		r.rep = &shimReport{}
		return *r.rep
	}
	b, err := os.ReadFile(r.report)
	if err != nil {
		r.t.Fatalf("--shim report=FILE wrote no report: %v", err)
	}
	var rep shimReport
	if err := json.Unmarshal(b, &rep); err != nil {
		r.t.Fatalf("report is not JSON: %v\n%s", err, b)
	}
	r.rep = &rep
	return rep
}

type shimReport struct {
	Agent    string    `json:"agent"`
	Shim     string    `json:"shim"`
	Finished time.Time `json:"finished"`
	Rules    []struct {
		Rule    string `json:"rule"`
		Enabled bool   `json:"enabled"`
		Hits    int    `json:"hits"`
		First   string `json:"first"`
	} `json:"rules"`
}

func (rep shimReport) rule(name string) (enabled bool, hits int, first string) {
	for _, r := range rep.Rules {
		if r.Rule == name {
			return r.Enabled, r.Hits, r.First
		}
	}
	return false, -1, ""
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func isUpdate(kind string) func(Line) bool {
	return func(l Line) bool {
		return l.Method() == "session/update" && (kind == "" || l.Get("params.update.sessionUpdate").Str == kind)
	}
}

func isResponse(id string) func(Line) bool {
	return func(l Line) bool { return l.IsResponse() && l.ID() == id }
}

// shimCase is one defect and the rule that repairs it. run drives the
// scenario and returns "" when the editor saw a compliant agent, else what
// was wrong.
type shimCase struct {
	rule, defects, config string
	// offToo are rules switched off with rule in the off run, because they
	// repair the same defect too.
	offToo []string
	run    func(r *shimRun) string
}

var shimCases = []shimCase{
	{rule: "notification-responses", defects: "answer-notifications,null-id-responses", run: func(r *shimRun) string {
		sid := r.open()
		r.notify("session/cancel", `{"sessionId":"`+sid+`"}`)
		r.b.Out.Response(r.t, r.prompt(sid, "hi"))
		r.finish()
		if strings.Contains(r.b.Stderr(), "unknown request id null") {
			return "the agent's id:null answers reached the relay as unusable frames"
		}
		return ""
	}},
	{rule: "envelope", defects: "missing-jsonrpc,result-and-error", run: func(r *shimRun) string {
		sid := r.open()
		l, ok := r.within(r.prompt(sid, "hi"), 3*time.Second)
		if !ok {
			return "the prompt whose answer carried both result and error was never answered"
		}
		if l.Get("error.code").Int() != -32603 {
			return "prompt answered " + l.String()
		}
		return ""
	}},
	{rule: "stdout-noise", defects: "stdout-noise", config: "shim {\n  stdout_noise_limit = 1\n}\n", run: func(r *shimRun) string {
		l := r.initialize(noCaps)
		if !strings.Contains(l.Get("error.message").Str, "log to stderr") {
			return "an agent writing logs on stdout was not reported: initialize answered " + l.String()
		}
		return ""
	}},
	{rule: "protocol-version", defects: "string-protocol-version", run: func(r *shimRun) string {
		l := r.initialize(noCaps)
		if v := l.Get("result.protocolVersion"); v.Raw != "1" {
			return "initialize answered " + l.String()
		}
		return ""
	}},
	{rule: "field-names", defects: "snake-case", run: func(r *shimRun) string {
		if l := r.initialize(noCaps); l.Get("error").Exists() {
			return "initialize failed: " + l.String()
		}
		l := r.call("session/new", `{"cwd":`+quoteJSON(r.t.TempDir())+`,"mcpServers":[]}`)
		sid := l.Get("result.sessionId").Str
		if sid == "" {
			return "session/new answered " + l.String()
		}
		resp := r.b.Out.Response(r.t, r.prompt(sid, "hi"))
		chunks := 0
		for _, l := range r.b.Out.Lines() {
			if isUpdate("agent_message_chunk")(l) && l.Get("params.sessionId").Str == sid {
				chunks++
			}
		}
		if chunks != 3 || resp.Get("result.stopReason").Str != "end_turn" {
			return fmt.Sprintf("%d chunks for the session, prompt answered %s", chunks, resp)
		}
		return ""
	}},
	{rule: "field-names", defects: "at-type-updates", run: func(r *shimRun) string {
		sid := r.open()
		r.b.Out.Response(r.t, r.prompt(sid, "hi"))
		if r.index(isUpdate("agent_message_chunk")) < 0 {
			return "no agent_message_chunk reached the editor"
		}
		return ""
	}},
	{rule: "field-names", defects: "canceled-spelling", offToo: []string{"cancelled-stop-reason"}, run: func(r *shimRun) string {
		sid := r.open()
		id := r.prompt(sid, "wait-cancel")
		time.Sleep(50 * time.Millisecond)
		r.notify("session/cancel", `{"sessionId":"`+sid+`"}`)
		if l := r.b.Out.Response(r.t, id); l.Get("result.stopReason").Str != "cancelled" {
			return "cancelled prompt answered " + l.String()
		}
		return ""
	}},
	{rule: "cancelled-stop-reason", defects: "end-turn-after-cancel", run: func(r *shimRun) string {
		sid := r.open()
		id := r.prompt(sid, "wait-cancel")
		time.Sleep(50 * time.Millisecond)
		r.notify("session/cancel", `{"sessionId":"`+sid+`"}`)
		if l := r.b.Out.Response(r.t, id); l.Get("result.stopReason").Str != "cancelled" {
			return "cancelled prompt answered " + l.String()
		}
		return ""
	}},
	{rule: "late-updates", defects: "late-updates", run: func(r *shimRun) string {
		sid := r.open()
		id := r.prompt(sid, "hi")
		r.b.Out.Response(r.t, id)
		// The agent wrote its late update before it reads this request,
		// so it has reached the bridge by the time this is answered.
		mode := r.call("session/set_mode", `{"sessionId":"`+sid+`","modeId":"plan"}`)
		at, end := r.index(isResponse(id)), mode.N
		for _, l := range r.b.Out.Lines() {
			if l.N > at && l.N < end && isUpdate("")(l) {
				return "an update reached the editor after its prompt's answer: " + l.String()
			}
		}
		return ""
	}},
	{rule: "early-updates", defects: "early-updates", run: func(r *shimRun) string {
		r.open()
		// Held, the update is written right after the answer: wait for it.
		upd, ok := r.b.Out.Find(WaitTimeout, isUpdate("available_commands_update"))
		if !ok {
			return "the early update never reached the editor"
		}
		if upd.N < r.index(isResponse("2")) {
			return "an update for the new session reached the editor before the session/new answer"
		}
		return ""
	}},
	{rule: "dangling-permissions", defects: "dangling-permission", run: func(r *shimRun) string {
		sid := r.open()
		id := r.prompt(sid, "permission")
		perm, ok := r.b.Out.Find(WaitTimeout, func(l Line) bool { return l.Method() == "session/request_permission" })
		if !ok {
			r.t.Fatal("no permission request")
		}
		r.notify("session/cancel", `{"sessionId":"`+sid+`"}`) // and the editor does not answer the permission
		r.b.Out.Response(r.t, id)
		r.call("session/set_mode", `{"sessionId":"`+sid+`","modeId":"plan"}`)
		if r.index(func(l Line) bool {
			return l.Method() == "$/cancel_request" && l.Get("params.requestId").Raw == perm.Get("id").Raw
		}) < 0 {
			return "the permission request the ended turn left pending was never withdrawn"
		}
		return ""
	}},
	{rule: "unstable-variants", defects: "unstable-variants", run: func(r *shimRun) string {
		sid := r.open()
		r.b.Out.Response(r.t, r.prompt(sid, "hi"))
		if r.index(isUpdate("subagent_update")) >= 0 {
			return "an unstable subagent_update reached the editor"
		}
		return ""
	}},
	{rule: "unsupported-client-methods", defects: "unsupported-client-methods", run: func(r *shimRun) string {
		if l := r.initialize(`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":false}}`); l.Get("error").Exists() {
			return "initialize failed"
		}
		l := r.call("session/new", `{"cwd":`+quoteJSON(r.t.TempDir())+`,"mcpServers":[]}`)
		sid := l.Get("result.sessionId").Str
		id := r.prompt(sid, "file")
		var got []string
		// Serve the agent's requests like an editor would until the turn ends.
		for i := 0; ; i++ {
			l, ok := r.b.Out.Find(WaitTimeout, func(l Line) bool {
				return l.N >= i && (isResponse(id)(l) || l.Get("method").Exists() && l.Get("id").Exists())
			})
			if !ok {
				r.t.Fatal("the file turn did not end")
			}
			i = l.N
			if isResponse(id)(l) {
				break
			}
			got = append(got, l.Method())
			if l.Method() == "fs/read_text_file" {
				r.b.WriteLine(`{"jsonrpc":"2.0","id":` + l.Get("id").Raw + `,"result":{"content":"hello"}}`)
			} else {
				r.b.WriteLine(`{"jsonrpc":"2.0","id":` + l.Get("id").Raw + `,"error":{"code":-32601,"message":"not supported"}}`)
			}
		}
		if slices.Contains(got, "fs/write_text_file") || slices.Contains(got, "terminal/create") {
			return fmt.Sprintf("the editor was asked for methods it did not advertise: %v", got)
		}
		if !slices.Contains(got, "fs/read_text_file") {
			return "the advertised fs/read_text_file did not reach the editor"
		}
		return ""
	}},
	{rule: "object-results", defects: "null-results", run: func(r *shimRun) string {
		sid := r.open()
		l := r.call("session/set_mode", `{"sessionId":"`+sid+`","modeId":"plan"}`)
		if l.Get("result").Raw != "{}" {
			return "session/set_mode answered " + l.String()
		}
		return ""
	}},
	{rule: "one-turn", defects: "concurrent-prompts", run: func(r *shimRun) string {
		sid := r.open()
		first := r.prompt(sid, "long")
		if _, ok := r.b.Out.Find(WaitTimeout, isUpdate("agent_message_chunk")); !ok {
			r.t.Fatal("the first turn did not start")
		}
		second := r.b.Out.Response(r.t, r.prompt(sid, "hi"))
		r.notify("session/cancel", `{"sessionId":"`+sid+`"}`)
		r.b.Out.Response(r.t, first)
		code := second.Get("error.code").Int()
		if !second.Get("error").Exists() || code == -32000 || code == -32002 || code == -32800 {
			return "a second prompt on a busy session was answered " + second.String()
		}
		return ""
	}},
	{rule: "schema", defects: "schema-violation", config: "shim {\n  schema_invalid = \"drop\"\n}\n", run: func(r *shimRun) string {
		sid := r.open()
		r.b.Out.Response(r.t, r.prompt(sid, "hi"))
		for _, l := range r.b.Out.Lines() {
			if isUpdate("agent_message_chunk")(l) && !l.Get("params.update.content").IsObject() {
				return "an agent_message_chunk whose content is not a content block reached the editor"
			}
		}
		return ""
	}},
	{rule: "method-not-found", defects: "wrong-unknown-code", run: func(r *shimRun) string {
		r.open()
		l := r.call("foo/bar", `{}`)
		if code := l.Get("error.code").Int(); code != -32601 || !l.Get("error.data.agentError").Exists() {
			return "an unknown method was answered " + l.String()
		}
		return ""
	}},
}

// TestShim_Rules: for each rule, the defect it repairs reaches the editor
// with only that rule off, and does not with it on; the report counts the
// rule's hits (with a first example) when on, and none when off.
func TestShim_Rules(t *testing.T) {
	for _, c := range shimCases {
		t.Run(c.rule+"/"+c.defects, func(t *testing.T) {
			t.Parallel()
			t.Run("on", func(t *testing.T) {
				r := startFlawed(t, c.defects, c.config)
				if bad := c.run(r); bad != "" {
					t.Errorf("with %s on: %s", c.rule, bad)
				}
				rep := r.finish()
				if on, hits, first := rep.rule(c.rule); !on || hits < 1 || first == "" {
					t.Errorf("report for %s: enabled %v, hits %d, first %q; want it counted", c.rule, on, hits, first)
				}
			})
			t.Run("off", func(t *testing.T) {
				r := startFlawed(t, c.defects, c.config, "--shim-disable", strings.Join(append([]string{c.rule}, c.offToo...), ","))
				if bad := c.run(r); bad == "" {
					t.Errorf("with %s off the editor saw no defect: the test cannot tell the rule works", c.rule)
				}
				rep := r.finish()
				if on, hits, _ := rep.rule(c.rule); on || hits != 0 {
					t.Errorf("report for %s: enabled %v, hits %d; want off and uncounted", c.rule, on, hits)
				}
				r.b.Out.TakeProblems() // the defect passed through: violations expected
			})
		})
	}
}

// conformantScript drives the flawed agent with no defect through every
// kind of exchange (updates, a permission, a file read, a mode change, an
// unknown method, a cancelled turn) and returns what the editor saw.
func conformantScript(t *testing.T, flags ...string) ([]string, *shimRun) {
	r := startFlawed(t, "", "", flags...)
	if l := r.initialize(`{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":false},"terminal":false}}`); l.Get("error").Exists() {
		t.Fatalf("initialize: %s", l)
	}
	dir := t.TempDir()
	l := r.call("session/new", `{"cwd":`+quoteJSON(dir)+`,"mcpServers":[]}`)
	sid := l.Get("result.sessionId").Str
	r.b.Out.Response(t, r.prompt(sid, "hi"))

	id := r.prompt(sid, "permission")
	perm, ok := r.b.Out.Find(WaitTimeout, func(l Line) bool { return l.Method() == "session/request_permission" })
	if !ok {
		t.Fatal("no permission request")
	}
	r.b.WriteLine(`{"jsonrpc":"2.0","id":` + perm.Get("id").Raw + `,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}`)
	r.b.Out.Response(t, id)

	id = r.prompt(sid, "file")
	read, ok := r.b.Out.Find(WaitTimeout, func(l Line) bool { return l.Method() == "fs/read_text_file" })
	if !ok {
		t.Fatal("no fs/read_text_file")
	}
	r.b.WriteLine(`{"jsonrpc":"2.0","id":` + read.Get("id").Raw + `,"result":{"content":"hello"}}`)
	r.b.Out.Response(t, id)

	r.call("session/set_mode", `{"sessionId":"`+sid+`","modeId":"plan"}`)
	r.call("foo/bar", `{}`)
	id = r.prompt(sid, "wait-cancel")
	time.Sleep(50 * time.Millisecond)
	r.notify("session/cancel", `{"sessionId":"`+sid+`"}`)
	r.b.Out.Response(t, id)
	r.finish()
	var out []string
	for _, l := range r.b.Out.Lines() {
		// The session's cwd is the run's own temporary directory.
		out = append(out, strings.ReplaceAll(string(l.Raw), dir, "$CWD"))
	}
	return out, r
}

// The shim never changes a compliant agent's traffic: what the editor sees
// with the shim on is byte for byte what it sees with the shim off (the
// editor's ids are its own in both runs, so no mapping is needed), and the
// report counts no repair.
func TestShim_CompliantAgentUnchanged(t *testing.T) {
	on, ron := conformantScript(t)
	off, _ := conformantScript(t, "--shim", "off")
	if len(on) < 15 {
		t.Fatalf("only %d lines: the script did not run", len(on))
	}
	if !slices.Equal(on, off) {
		t.Errorf("the shim changed a compliant stream:\non:\n%s\noff:\n%s", strings.Join(on, "\n"), strings.Join(off, "\n"))
	}
	for _, rule := range ron.finish().Rules {
		if rule.Hits != 0 {
			t.Errorf("rule %s counted %d hits on a compliant agent: %s", rule.Rule, rule.Hits, rule.First)
		}
	}
}

// --shim report prints a table on stderr at exit: every rule, its hits and
// the first example.
func TestShim_ReportOnStderr(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := StartBridge(t, []string{"--shim", "report", "--", exe}, []string{"FAKE_AGENT=flawed", "FLAWED_DEFECTS=null-results"}, nil)
	r := &shimRun{t: t, b: b}
	sid := r.open()
	r.call("session/set_mode", `{"sessionId":"`+sid+`","modeId":"plan"}`)
	b.In.Close()
	if _, ok := b.WaitExit(15 * time.Second); !ok {
		t.Fatal("bridge did not exit")
	}
	stderr := b.Stderr()
	if !strings.Contains(stderr, "compliance shim report") {
		t.Fatalf("no report on stderr:\n%s", stderr)
	}
	for _, want := range []string{"RULE", "HITS", "FIRST EXAMPLE"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	var objectLine string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "object-results ") {
			objectLine = line
		}
	}
	if f := strings.Fields(objectLine); len(f) < 3 || f[1] != "1" || !strings.Contains(objectLine, "session/set_mode answered null") {
		t.Errorf("object-results line = %q, want 1 hit and its example", objectLine)
	}
}

// `acp-bridge check -- <agent>` and `acp-bridge check -- acp-bridge -- <agent>`
// side by side: the flawed agent with a dozen defects fails check's
// mandatory scenarios; behind the bridge (shim on by default) it passes
// every one, and with --shim off it fails again.
func TestShim_CheckSideBySide(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	env := []string{"FAKE_AGENT=flawed", "FLAWED_DEFECTS=answer-notifications,null-id-responses,wrong-unknown-code," +
		"end-turn-after-cancel,concurrent-prompts,null-results,late-updates,early-updates,string-protocol-version," +
		"snake-case,missing-jsonrpc,unstable-variants,at-type-updates,stdout-noise"}
	mandatoryFailures := func(rep checkReport) []string {
		var out []string
		for _, r := range rep.Results {
			if r.Tier == "mandatory" && r.Status != "PASS" {
				out = append(out, r.ID+": "+r.Status+" "+r.Reason)
			}
		}
		return out
	}
	direct, _, _ := runCheck(t, env, "--", exe)
	if f := mandatoryFailures(direct); len(f) < 3 {
		t.Errorf("the flawed agent checked directly fails only %q: the defects are not on", f)
	}
	shimmed, code, out := runCheck(t, env, "--", BridgeBin, "--", exe)
	if f := mandatoryFailures(shimmed); len(f) != 0 || code != 0 {
		t.Errorf("behind the shim, exit %d and mandatory failures %q\n%s", code, f, out)
	}
	for _, id := range []string{"concurrent-prompt", "set-mode"} {
		if s := shimmed.status(id); s != "PASS" {
			t.Errorf("behind the shim %s: %s", id, s)
		}
	}
	off, _, _ := runCheck(t, env, "--", BridgeBin, "--shim", "off", "--", exe)
	if f := mandatoryFailures(off); len(f) == 0 {
		t.Errorf("with --shim off the bridge hid the agent's defects from check")
	}
}

// The shim fronts a WebSocket agent the same way as a child: snake_case
// results and a wrong code for an unknown method, repaired with the shim on
// and passed through with it off.
func TestShim_WebSocketAgent(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			srv := flawed.NewWSServer(flawed.Set{flawed.SnakeCase: true, flawed.WrongUnknownCode: true})
			t.Cleanup(srv.Close)
			b := StartBridge(t, []string{"--shim", mode, "--url", srv.URL}, nil, nil)
			r := &shimRun{t: t, b: b}
			r.initialize(noCaps)
			sid := r.call("session/new", `{"cwd":`+quoteJSON(t.TempDir())+`,"mcpServers":[]}`).Get("result.sessionId").Str
			code := r.call("foo/bar", `{}`).Get("error.code").Int()
			repaired := sid != "" && code == -32601
			if repaired != (mode == "on") {
				t.Errorf("shim %s: sessionId %q, unknown method code %d", mode, sid, code)
			}
			if mode == "off" {
				b.Out.TakeProblems() // the snake_case result passed through
			}
		})
	}
}

package tests

// Parity with codex-acp 0.16.0, the adapter Zed ships for Codex (it embeds
// Codex's core): one scripted session against the same fake Responses API
// (tests/fakeresponses) and the same config.toml, through the bridge in
// front of the real Codex CLI's app-server and through codex-acp, must show
// the editor the same things, up to the differences listed in
// codexParityDiffs (each with its reason; translate/codexapp's package doc
// lists them too). codex-acp's side is recorded in
// testdata/codex-acp-0.16.0.txt, normalised; re-record it with
//
//	tests/testdata/record-codex-acp.sh
//
// which installs codex-acp from npm into a scratch directory and runs
// TestCodex_Parity with -codex-acp pointing at its binary.

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var codexACP = flag.String("codex-acp", "", "record codex-acp's side of TestCodex_Parity by running this codex-acp binary before comparing")

const codexParityRecording = "testdata/codex-acp-0.16.0.txt"

// codexParityStep is one editor request of the script; option is the kind
// of permission option each of the step's permission requests is answered
// with (allow_once when "").
type codexParityStep struct {
	method, params string
	cancel         bool
	option         string
}

var codexParityScript = []codexParityStep{
	{method: "initialize", params: `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}`},
	{method: "session/new", params: `{"cwd":"CWD","mcpServers":[]}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"think, then say hello"}]}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"run the tool"}]}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"run the tool again"}]}`, option: "reject_once"},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"patch a file"}]}`},
	{method: "session/set_mode", params: `{"sessionId":"SESSION","modeId":"full-access"}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"say hello"}]}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"slow"}]}`, cancel: true},
}

// playCodexParity plays script and returns the transcript, normalised like
// playParity's: "< " editor lines, "> " agent lines, session id SESSION,
// cwd CWD, permission request ids P1, P2….
func playCodexParity(t *testing.T, a parityLines, cwd string, script []codexParityStep) []string {
	t.Helper()
	var out []string
	session := ""
	norm := func(s string) string {
		if session != "" {
			s = strings.ReplaceAll(s, session, "SESSION")
		}
		return strings.ReplaceAll(s, cwd, "CWD")
	}
	calls := 0
	for i, st := range script {
		id := i + 1
		params := strings.ReplaceAll(strings.ReplaceAll(st.params, "SESSION", session), "CWD", cwd)
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, st.method, params)
		a.send(line)
		out = append(out, "< "+norm(line))
		cancel := st.cancel
		for {
			l, ok := a.next()
			if !ok {
				t.Fatalf("step %d (%s): no answer; transcript so far:\n%s", id, st.method, strings.Join(out, "\n"))
			}
			r := gjson.Parse(l)
			if cancel && r.Get("method").Str == "session/update" && r.Get("params.update.sessionUpdate").Str == "agent_message_chunk" {
				cancel = false
				out = append(out, "> "+norm(l))
				c := fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, session)
				a.send(c)
				out = append(out, "< "+norm(c))
				continue
			}
			if r.Get("method").Str == "session/request_permission" && r.Get("id").Exists() {
				calls++
				pid := fmt.Sprintf(`"P%d"`, calls)
				out = append(out, "> "+norm(strings.Replace(l, `"id":`+r.Get("id").Raw, `"id":`+pid, 1)))
				kind := st.option
				if kind == "" {
					kind = "allow_once"
				}
				option := ""
				for _, o := range r.Get("params.options").Array() {
					if o.Get("kind").Str == kind && option == "" {
						option = o.Get("optionId").Str
					}
				}
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":{"outcome":"selected","optionId":%q}}}`, r.Get("id").Raw, option)
				a.send(answer)
				out = append(out, "< "+norm(strings.Replace(answer, `"id":`+r.Get("id").Raw, `"id":`+pid, 1)))
				continue
			}
			if st.method == "session/new" && session == "" && r.Get("id").Int() == int64(id) {
				session = r.Get("result.sessionId").Str
			}
			out = append(out, "> "+norm(l))
			if r.Get("id").Int() == int64(id) && !r.Get("method").Exists() {
				if e := r.Get("error"); e.Exists() {
					t.Fatalf("step %d (%s) failed: %s", id, st.method, e.Raw)
				}
				break
			}
		}
	}
	return out
}

// codexParityView is what the issue holds the two to: per step the kinds of
// updates in order (repeats merged), each tool call's lifecycle (kind and
// the statuses it went through), the permission options (kinds) and the
// outcome sent, the stop reason and whether usage came; and the session's
// modes and whether models are offered.
type codexParityView struct {
	Modes, Models string
	Permissions   []string
	Steps         [][]string
}

func viewCodexParity(lines []string) codexParityView {
	var v codexParityView
	var step []string
	tools := map[string]int{} // toolCallId → index in step
	add := func(s string) {
		if n := len(step); n > 0 && step[n-1] == s {
			return
		}
		step = append(step, s)
	}
	for _, l := range lines {
		r := gjson.Parse(l[2:])
		if strings.HasPrefix(l, "< ") {
			if r.Get("method").Exists() && r.Get("id").Exists() {
				if step != nil {
					v.Steps = append(v.Steps, step)
				}
				step = []string{r.Get("method").Str}
				tools = map[string]int{}
			} else if r.Get("result.outcome").Exists() {
				v.Permissions[len(v.Permissions)-1] += " -> " + r.Get("result.outcome.outcome").Str
			} else if r.Get("method").Str == "session/cancel" {
				add("(cancel)")
			}
			continue
		}
		switch {
		case r.Get("method").Str == "session/update":
			u := r.Get("params.update")
			kind := u.Get("sessionUpdate").Str
			switch kind {
			case "tool_call", "tool_call_update":
				id := u.Get("toolCallId").Str
				i, ok := tools[id]
				if !ok {
					step = append(step, "tool "+u.Get("kind").Str+":")
					i = len(step) - 1
					tools[id] = i
				}
				if s := u.Get("status").Str; s != "" && !strings.HasSuffix(step[i], " "+s) {
					step[i] += " " + s
				}
			case "available_commands_update", "config_option_update", "current_mode_update":
				// Session-level, at moments of each agent's choosing.
			default:
				add(kind)
			}
		case r.Get("method").Str == "session/request_permission":
			var kinds []string
			for _, o := range r.Get("params.options").Array() {
				kinds = append(kinds, o.Get("kind").Str)
			}
			slices.Sort(kinds)
			v.Permissions = append(v.Permissions, fmt.Sprintf("step %d: %s", len(v.Steps)+1, strings.Join(kinds, " ")))
		case r.Get("result.sessionId").Exists():
			res := r.Get("result")
			var modes []string
			for _, m := range res.Get("modes.availableModes").Array() {
				modes = append(modes, m.Get("id").Str+"="+m.Get("name").Str)
			}
			v.Modes = res.Get("modes.currentModeId").Str + " of " + strings.Join(modes, " ")
			for _, o := range res.Get("configOptions").Array() {
				if o.Get("id").Str == "model" {
					v.Models = fmt.Sprintf("current %s, listed first: %s", o.Get("currentValue").Str, o.Get("options.0.value").Str)
				}
			}
			add("answer")
		case r.Get("result.stopReason").Exists():
			answer := "answer " + r.Get("result.stopReason").Str
			if r.Get("result.usage").Exists() {
				answer += " with usage"
			}
			add(answer)
		case r.Get("result").Exists():
			add("answer")
		}
	}
	if step != nil {
		v.Steps = append(v.Steps, step)
	}
	// Between a cancel and the prompt's answer, what still streams (the
	// model's first words, its usage) is a race between the interrupt and
	// the fake API: only the answer is compared.
	for i, st := range v.Steps {
		if c := slices.Index(st, "(cancel)"); c >= 0 {
			v.Steps[i] = append(st[:c+1:c+1], slices.DeleteFunc(slices.Clone(st[c+1:]), func(s string) bool { return !strings.HasPrefix(s, "answer") })...)
		}
	}
	return v
}

// codexParityDiffs are the known differences: a regexp over a line of the
// bridge's view and what codex-acp shows instead ("" when it shows
// nothing), each with its reason.
var codexParityDiffs = []struct {
	match, acp, why string
}{
	{`^answer (end_turn|cancelled) with usage$`, "answer $1",
		"the bridge adds the turn's token usage to the prompt's answer (ACP's usage field, from thread/tokenUsage/updated); codex-acp 0.16.0 sends none"},
	{`^tool execute: in_progress failed$`, "",
		"the app-server announces a command (item/started) before it asks to run it, so the bridge shows the tool call from the start and closes it failed when the user rejects it; codex-acp, inside Codex's core, announces it only once it is approved"},
	{`^(step \d+: )allow_always allow_once reject_once`, "${1}allow_once reject_once",
		"for a file change the bridge also offers \"always\" (Codex's acceptForSession for those files, which the app-server accepts); codex-acp offers allow once and reject"},
}

// acpSide rewrites a line of the bridge's view into what codex-acp shows,
// by codexParityDiffs; "" drops it. file says whether the line is a file
// change's permission (the only one the third difference applies to).
func acpSide(line string, file bool) string {
	for i, d := range codexParityDiffs {
		if i == 2 && !file {
			continue
		}
		line = regexp.MustCompile(d.match).ReplaceAllString(line, d.acp)
	}
	return line
}

func TestCodex_Parity(t *testing.T) {
	t.Parallel()
	s := newCodexSetup(t, "stdio")
	if *codexACP != "" {
		recordCodexACP(t, *codexACP, s)
	}
	data, err := os.ReadFile(codexParityRecording)
	if err != nil {
		t.Fatalf("reading codex-acp's recorded side: %v (record it with tests/testdata/record-codex-acp.sh)", err)
	}
	var want []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "< ") || strings.HasPrefix(l, "> ") {
			want = append(want, l)
		}
	}
	b := StartBridge(t, s.args, s.env, nil)
	got := playCodexParity(t, bridgeParityLines(b, codexWait), s.cwd, codexParityScript)
	w, g := viewCodexParity(want), viewCodexParity(got)
	for i := range g.Steps {
		var kept []string
		for _, line := range g.Steps[i] {
			if line = acpSide(line, false); line != "" {
				kept = append(kept, line)
			}
		}
		g.Steps[i] = kept
	}
	for i, p := range g.Permissions {
		// The patch step is the only file change of the script.
		g.Permissions[i] = acpSide(p, strings.HasPrefix(p, "step 6:"))
	}
	if w.Modes != g.Modes {
		t.Errorf("modes:\n got  %s\n want %s", g.Modes, w.Modes)
	}
	if w.Models != g.Models {
		t.Errorf("models:\n got  %s\n want %s", g.Models, w.Models)
	}
	if !slices.Equal(w.Permissions, g.Permissions) {
		t.Errorf("permission requests:\n got  %q\n want %q", g.Permissions, w.Permissions)
	}
	if len(g.Steps) != len(w.Steps) {
		t.Fatalf("%d steps, want %d", len(g.Steps), len(w.Steps))
	}
	for i := range w.Steps {
		if !slices.Equal(g.Steps[i], w.Steps[i]) {
			t.Errorf("step %d (%s):\n got\n\t%s\n want\n\t%s", i+1, w.Steps[i][0], strings.Join(g.Steps[i][1:], "\n\t"), strings.Join(w.Steps[i][1:], "\n\t"))
		}
	}
	if t.Failed() {
		t.Logf("bridge transcript:\n%s", strings.Join(got, "\n"))
	}
}

// recordCodexACP plays the script through codex-acp (bin) with the same
// CODEX_HOME and fake API, and writes the recording.
func recordCodexACP(t *testing.T, bin string, s *codexSetup) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Dir = s.cwd
	got := playCodexParity(t, adapterLines(t, cmd, "codex-acp", codexWait, nil), s.cwd, codexParityScript)
	header := "# codex-acp 0.16.0 in front of tests/fakeresponses (the fake Responses API),\n" +
		"# with the config.toml of tests/codex_cli_test.go, playing codexParityScript\n" +
		"# (codex_parity_test.go). Recorded by tests/testdata/record-codex-acp.sh;\n" +
		"# session id, cwd and permission request ids normalised. \"< \" is the\n" +
		"# editor, \"> \" the adapter.\n"
	if err := os.WriteFile(codexParityRecording, []byte(header+strings.Join(got, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

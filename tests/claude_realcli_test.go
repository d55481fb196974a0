package tests

// The opt-in end-to-end test with the real Claude Code CLI: the bridge runs
// each CLI named by ACP_BRIDGE_CLAUDE_CLIS against a fake Anthropic API on
// loopback (ANTHROPIC_BASE_URL), so no network beyond the npm registry that
// installed the CLI is needed. tests/testdata/install-claude-code.sh
// installs Claude Code 2.0.77 and the newest 2.1 from npm into a scratch
// directory and runs it.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// EnvClaudeCLIs names the real Claude Code CLIs to test, separated by
// commas: native executables, or cli.js files run with node.
const EnvClaudeCLIs = "ACP_BRIDGE_CLAUDE_CLIS"

// Texts of the fake Anthropic API.
const (
	realHello = "Hello from the fake API."
	realDone  = "Done."
	// realToolFile is what the tool the fake API asks for creates.
	realToolFile = "made-by-real-cli.txt"
)

// realCLIScript is the session played with a real CLI.
var realCLIScript = []parityStep{
	{method: "initialize", params: `{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false},"terminal":false}}`},
	{method: "session/new", params: `{"cwd":"CWD","mcpServers":[]}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"say hello"}]}`},
	{method: "session/prompt", params: `{"sessionId":"SESSION","prompt":[{"type":"text","text":"run the tool"}]}`},
}

// With the real Claude Code (2.0 and 2.1), the editor sees what
// claude-agent-acp shows: the CLI's models and the five modes, streamed
// text, a usage_update, and a tool call that is announced once
// (tool_call) and then only updated (tool_call_update) while the user is
// asked and the tool runs.
func TestClaude_RealCLI(t *testing.T) {
	list := os.Getenv(EnvClaudeCLIs)
	if list == "" {
		t.Skipf("no real Claude Code CLI to test: set %s to a comma-separated list of `claude` executables or cli.js files (tests/testdata/install-claude-code.sh installs 2.0.77 and the newest 2.1 from npm and runs this test)", EnvClaudeCLIs)
	}
	for _, cli := range strings.Split(list, ",") {
		command := []string{cli}
		if strings.HasSuffix(cli, ".js") {
			command = []string{"node", cli}
		}
		out, err := exec.Command(command[0], append(command[1:], "--version")...).Output()
		if err != nil {
			t.Errorf("%s --version: %v (is %s a Claude Code CLI?)", cli, err, EnvClaudeCLIs)
			continue
		}
		version, _, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
		t.Run(version, func(t *testing.T) { testRealCLI(t, command) })
	}
}

func testRealCLI(t *testing.T, command []string) {
	api := newFakeAnthropicAPI(t)
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + api.URL,
		"ANTHROPIC_API_KEY=sk-ant-fake-key-for-tests",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
	}
	b := StartBridge(t, append([]string{"--dialect", "claude-stream-json", "--"}, command...), env, nil)
	cwd := parityCwd(t)
	// A real CLI takes seconds to start (over 10 on two busy cores).
	lines := playParity(t, bridgeParityLines(b, time.Minute), cwd, realCLIScript)
	if t.Failed() {
		return
	}
	defer func() {
		if t.Failed() {
			t.Logf("transcript:\n%s\nAPI requests:\n%s", strings.Join(lines, "\n"), strings.Join(api.log(), "\n"))
		}
	}()

	v := viewParity(lines)
	if want := "default of default acceptEdits plan dontAsk bypassPermissions"; v.Modes != want {
		t.Errorf("modes %q, want %q", v.Modes, want)
	}
	var models []string
	for _, l := range lines {
		if r := gjson.Parse(strings.TrimPrefix(l, "> ")); r.Get("result.sessionId").Exists() {
			for _, m := range r.Get("result.models.availableModels").Array() {
				models = append(models, m.Get("modelId").Str)
			}
			if cur := r.Get("result.models.currentModelId").Str; !slices.Contains(models, cur) {
				t.Errorf("current model %q is not one of the models %q", cur, models)
			}
		}
	}
	if len(models) < 2 {
		t.Errorf("models %q: want the CLI's list", models)
	}

	hello := v.Steps[2]
	if !slices.Contains(hello, "agent_message_chunk "+realHello) {
		t.Errorf("say hello: updates %q, want the message %q", hello, realHello)
	}
	if !slices.ContainsFunc(hello, func(s string) bool {
		return strings.HasPrefix(s, "usage_update used=") && !strings.HasPrefix(s, "usage_update used=0 ")
	}) {
		t.Errorf("say hello: updates %q, want a usage_update", hello)
	}
	if last := hello[len(hello)-1]; !strings.HasPrefix(last, "answer end_turn") {
		t.Errorf("say hello ended %q, want end_turn", last)
	}

	tool := v.Steps[3]
	var lifecycle []string
	for _, s := range tool {
		if strings.HasPrefix(s, "tool_call") {
			f := strings.Fields(s)
			lifecycle = append(lifecycle, f[0]+" "+f[2])
		}
	}
	if len(lifecycle) < 2 || !strings.HasPrefix(lifecycle[0], "tool_call pending") || lifecycle[len(lifecycle)-1] != "tool_call_update completed" ||
		slices.ContainsFunc(lifecycle[1:], func(s string) bool { return strings.HasPrefix(s, "tool_call ") }) {
		t.Errorf("run the tool: tool call lifecycle %q, want one tool_call, then tool_call_updates ending completed", lifecycle)
	}
	if !slices.ContainsFunc(tool, func(s string) bool {
		return strings.HasPrefix(s, "tool_call_update ") && strings.Contains(s, " toolResponse={")
	}) {
		t.Errorf("run the tool: updates %q, want the PostToolUse update with the tool's response (tool_use_result)", tool)
	}
	if len(v.Permissions) != 1 || !strings.HasPrefix(v.Permissions[0], "step 4: ") {
		t.Errorf("permission requests %q, want one, in the second prompt", v.Permissions)
	}
	if !slices.Contains(tool, "agent_message_chunk "+realDone) {
		t.Errorf("run the tool: updates %q, want the message %q", tool, realDone)
	}
	if last := tool[len(tool)-1]; !strings.HasPrefix(last, "answer end_turn") {
		t.Errorf("run the tool ended %q, want end_turn", last)
	}
	if _, err := os.Stat(filepath.Join(cwd, realToolFile)); err != nil {
		t.Errorf("the allowed tool did not run: %v", err)
	}
}

// fakeAnthropicAPI answers the Messages API on loopback: a tool use of
// Bash when the user asks to run the tool, "Done." once its result is
// back, a greeting otherwise; side requests (titles, summaries: no tools)
// get a short text.
type fakeAnthropicAPI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	nextID   int
}

func newFakeAnthropicAPI(t *testing.T) *fakeAnthropicAPI {
	a := &fakeAnthropicAPI{}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *fakeAnthropicAPI) log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.requests)
}

func (a *fakeAnthropicAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path+" "+truncate(string(body), 300))
	a.nextID++
	id := fmt.Sprintf("msg_fake_%d", a.nextID)
	a.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		if strings.HasSuffix(r.URL.Path, "/count_tokens") {
			writeJSON(w, map[string]any{"input_tokens": 10})
			return
		}
		http.NotFound(w, r)
		return
	}
	req := gjson.ParseBytes(body)
	msgs := req.Get("messages").Array()
	last := ""
	if len(msgs) > 0 {
		last = msgs[len(msgs)-1].Get("content").Raw
	}
	var blocks []map[string]any
	stop := "end_turn"
	switch {
	case len(req.Get("tools").Array()) == 0:
		blocks = []map[string]any{{"type": "text", "text": "Fake title"}}
	case strings.Contains(last, `"tool_result"`):
		blocks = []map[string]any{{"type": "text", "text": realDone}}
	case strings.Contains(last, "run the tool"):
		blocks = []map[string]any{{"type": "tool_use", "id": "toolu_real_" + id, "name": "Bash",
			"input": map[string]any{"command": "touch " + realToolFile, "description": "Create a file"}}}
		stop = "tool_use"
	default:
		blocks = []map[string]any{{"type": "text", "text": realHello}}
	}
	model := req.Get("model").Str
	usage := map[string]any{"input_tokens": 50, "output_tokens": 12, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	if !req.Get("stream").Bool() {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model, "content": blocks,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(typ string, v map[string]any) {
		v["type"] = typ
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
	}
	event("message_start", map[string]any{"message": map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 50, "output_tokens": 1}}})
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			event("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(b["input"])
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 12}})
	event("message_stop", map[string]any{})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

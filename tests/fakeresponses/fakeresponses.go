// Package fakeresponses is a loopback fake of the OpenAI Responses API
// (POST /v1/responses, an SSE stream of response events), enough for the
// real Codex CLI to run turns offline. What it answers is chosen by words
// in the latest user message:
//
//	"think"  a reasoning summary, streamed, before the answer
//	"run"    an exec_command call that asks to run unsandboxed (so Codex
//	         asks for approval): touch RunFile
//	"patch"  an exec_command call that runs apply_patch, adding PatchFile
//	"slow"   a first delta, then nothing until the client goes away
//	"fail"   response.failed with FailMessage
//
// anything else gets Hello. After a tool's output the answer is Done.
package fakeresponses

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/tidwall/gjson"
)

// What the fake says and does.
const (
	Hello       = "Hello from the fake API."
	Done        = "Done."
	Thought     = "Thinking about the request."
	RunFile     = "made-by-codex.txt"
	PatchFile   = "patched-by-codex.txt"
	PatchLine   = "added by apply_patch"
	FailMessage = "The fake model is overloaded; try again later."
)

// Server is the fake API on loopback.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	n        int
}

// Start starts the fake; Close stops it.
func Start() *Server {
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Log returns one line per request the fake saw.
func (s *Server) Log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// ConfigTOML is a CODEX_HOME/config.toml that points Codex at the fake,
// with the key in the environment variable envKey.
func (s *Server) ConfigTOML(envKey string) string {
	return fmt.Sprintf(`model = "gpt-fake"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = %q
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`, s.URL+"/v1", envKey)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.n++
	n := s.n
	line := r.Method + " " + r.URL.Path
	if len(body) > 0 {
		line += " " + lastInput(body)
	}
	s.requests = append(s.requests, line)
	s.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"models":[]}`)
			return
		}
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	event := func(typ string, v map[string]any) {
		v["type"] = typ
		data, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	resp := fmt.Sprintf("resp_%d", n)
	event("response.created", map[string]any{"response": map[string]any{"id": resp}})
	input := gjson.GetBytes(body, "input").Array()
	var last gjson.Result
	if len(input) > 0 {
		last = input[len(input)-1]
	}
	user := ""
	for i := len(input) - 1; i >= 0; i-- {
		if input[i].Get("role").Str == "user" {
			user = input[i].Get("content.#.text").Raw
			break
		}
	}
	idx := 0
	message := func(text string) {
		id := fmt.Sprintf("msg_%d_%d", n, idx)
		event("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "content": []any{}}})
		half := len(text) / 2
		for _, d := range []string{text[:half], text[half:]} {
			event("response.output_text.delta", map[string]any{"output_index": idx, "content_index": 0, "item_id": id, "delta": d})
		}
		event("response.output_item.done", map[string]any{"output_index": idx, "item": map[string]any{"type": "message", "id": id, "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text}}}})
		idx++
	}
	call := func(cmd, justification string) {
		args := map[string]any{"cmd": cmd, "login": false}
		if justification != "" {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = justification
		}
		a, _ := json.Marshal(args)
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d", n), "call_id": fmt.Sprintf("call_%d", n), "name": "exec_command", "arguments": string(a)}
		event("response.output_item.added", map[string]any{"output_index": idx, "item": item})
		event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		idx++
	}
	switch {
	case last.Get("type").Str == "function_call_output" || last.Get("type").Str == "custom_tool_call_output":
		message(Done)
	case strings.Contains(user, "fail"):
		event("response.failed", map[string]any{"response": map[string]any{"id": resp, "error": map[string]any{"code": "server_error", "message": FailMessage}}})
		return
	case strings.Contains(user, "slow"):
		id := fmt.Sprintf("msg_%d_0", n)
		event("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "id": id, "role": "assistant", "content": []any{}}})
		event("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": id, "delta": "Working"})
		<-r.Context().Done()
		return
	case strings.Contains(user, "run"):
		call("touch "+RunFile, "Create a file?")
	case strings.Contains(user, "patch"):
		call("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: "+PatchFile+"\n+"+PatchLine+"\n*** End Patch\nEOF\n", "")
	default:
		if strings.Contains(user, "think") {
			id := fmt.Sprintf("rs_%d", n)
			event("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{"type": "reasoning", "id": id, "summary": []any{}}})
			event("response.reasoning_summary_part.added", map[string]any{"output_index": idx, "item_id": id, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
			half := len(Thought) / 2
			for _, d := range []string{Thought[:half], Thought[half:]} {
				event("response.reasoning_summary_text.delta", map[string]any{"output_index": idx, "item_id": id, "summary_index": 0, "delta": d})
			}
			event("response.output_item.done", map[string]any{"output_index": idx, "item": map[string]any{"type": "reasoning", "id": id,
				"summary": []any{map[string]any{"type": "summary_text", "text": Thought}}}})
			idx++
		}
		message(Hello)
	}
	event("response.completed", map[string]any{"response": map[string]any{"id": resp, "usage": map[string]any{
		"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 20},
		"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 2}, "total_tokens": 110}}})
}

// lastInput is the last input item of a request, shortened for the log.
func lastInput(body []byte) string {
	in := gjson.GetBytes(body, "input").Array()
	if len(in) == 0 {
		return ""
	}
	s := in[len(in)-1].Raw
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

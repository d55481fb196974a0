package tests

// Every line the bridge writes to stdout is checked here as it arrives:
// framing (one JSON object per "\n"-terminated line, ACP spec, Transports),
// the JSON-RPC envelope, and the ACP schema shipped in the acp-go-sdk
// module, selected by method. A response is checked against the result type
// of the editor request it answers, which EditorInput recorded from stdin;
// its id must be byte-identical to that request's and no request may be
// answered twice.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/acpschema"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/tidwall/gjson"
)

// acpSchema is the ACP schema compiled per message type.
type acpSchema struct {
	// toEditorRequests: params of requests the agent side sends, by method.
	toEditorRequests map[string]*jsonschema.Schema
	// toEditorNotifications: params of notifications the agent side sends.
	toEditorNotifications map[string]*jsonschema.Schema
	// results: results of editor requests, by the request's method.
	results map[string]*jsonschema.Schema

	errorObj, requestID                *jsonschema.Schema
	extRequest, extResponse, extNotify *jsonschema.Schema
	// usageUpdate is session/update from schema.unstable.json, for the
	// usage_update variant: stable in ACP v1 since, but not in the
	// schema.json of the acp-go-sdk version this module requires.
	usageUpdate *jsonschema.Schema
}

var (
	schemaOnce sync.Once
	schemaVal  *acpSchema
	schemaErr  error
)

// loadSchema compiles $(go list -m github.com/coder/acp-go-sdk).Dir/schema/
// schema.json once per test binary.
func loadSchema() (*acpSchema, error) {
	schemaOnce.Do(func() { schemaVal, schemaErr = compileSchema() })
	return schemaVal, schemaErr
}

func compileSchema() (*acpSchema, error) {
	out, err := exec.Command("go", "list", "-m", "-json", "github.com/coder/acp-go-sdk").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m github.com/coder/acp-go-sdk: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go list -m -json: no Dir in %s (%v)", out, err)
	}
	path := filepath.Join(mod.Dir, "schema", "schema.json")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	const url = "https://acp.invalid/schema.json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	compile := func(def string) (*jsonschema.Schema, error) {
		s, err := c.Compile(url + "#/$defs/" + def)
		if err != nil {
			return nil, fmt.Errorf("%s: compiling %s: %w", path, def, err)
		}
		return s, nil
	}
	s := &acpSchema{
		toEditorRequests:      make(map[string]*jsonschema.Schema),
		toEditorNotifications: make(map[string]*jsonschema.Schema),
		results:               make(map[string]*jsonschema.Schema),
	}
	defs, _ := doc.(map[string]any)["$defs"].(map[string]any)
	if len(defs) == 0 {
		return nil, fmt.Errorf("%s: no $defs", path)
	}
	// Each request, response and notification type names its method and
	// the side that handles it: x-side "client" types are sent by the
	// agent side (the bridge, toward the editor), x-side "agent" responses
	// answer the editor's requests.
	for name, d := range defs {
		def, _ := d.(map[string]any)
		method, _ := def["x-method"].(string)
		side, _ := def["x-side"].(string)
		if method == "" {
			continue
		}
		var m map[string]*jsonschema.Schema
		switch {
		case side == "client" && strings.HasSuffix(name, "Request"):
			m = s.toEditorRequests
		case side == "client" && strings.HasSuffix(name, "Notification"):
			m = s.toEditorNotifications
		case side == "agent" && strings.HasSuffix(name, "Response"):
			m = s.results
		default:
			continue
		}
		if m[method], err = compile(name); err != nil {
			return nil, err
		}
	}
	for _, p := range []struct {
		dst **jsonschema.Schema
		def string
	}{
		{&s.errorObj, "Error"}, {&s.requestID, "RequestId"},
		{&s.extRequest, "ExtRequest"}, {&s.extResponse, "ExtResponse"}, {&s.extNotify, "ExtNotification"},
	} {
		if *p.dst, err = compile(p.def); err != nil {
			return nil, err
		}
	}
	if err := s.addUnstable(filepath.Join(mod.Dir, "schema", "schema.unstable.json")); err != nil {
		return nil, err
	}
	for _, must := range []string{"session/prompt", "initialize", "session/new"} {
		if s.results[must] == nil {
			return nil, fmt.Errorf("%s: no response type for %s", path, must)
		}
	}
	if s.toEditorNotifications["session/update"] == nil || s.toEditorRequests["session/request_permission"] == nil {
		return nil, fmt.Errorf("%s: no session/update or session/request_permission type", path)
	}
	return s, nil
}

// addUnstable adds from the unstable schema at path what the agent side
// may send of it: the results of unstable methods (session/set_model) and
// session/update's usage_update.
func (s *acpSchema) addUnstable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	const url = "https://acp.invalid/schema.unstable.json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		return err
	}
	compile := func(def string) (*jsonschema.Schema, error) {
		sch, err := c.Compile(url + "#/$defs/" + def)
		if err != nil {
			return nil, fmt.Errorf("%s: compiling %s: %w", path, def, err)
		}
		return sch, nil
	}
	defs, _ := doc.(map[string]any)["$defs"].(map[string]any)
	for name, d := range defs {
		def, _ := d.(map[string]any)
		method, _ := def["x-method"].(string)
		side, _ := def["x-side"].(string)
		if method == "" || side != "agent" || !strings.HasSuffix(name, "Response") || s.results[method] != nil {
			continue
		}
		if s.results[method], err = compile(name); err != nil {
			return err
		}
	}
	s.usageUpdate, err = compile("SessionNotification")
	return err
}

// validator checks one bridge's stdout.
type validator struct {
	in     *EditorInput
	schema *acpSchema
	err    error

	mu       sync.Mutex
	answered map[string]int  // raw editor request id → responses seen
	toEditor map[string]bool // raw ids of the bridge's requests to the editor
	// v2, when set, is the schema the editor speaks: ACP v2 (see
	// Bridge.SpeaksV2).
	v2 *acpschema.Schema
}

func newValidator(in *EditorInput) *validator {
	s, err := loadSchema()
	return &validator{in: in, schema: s, err: err, answered: make(map[string]int), toEditor: make(map[string]bool)}
}

// allowedKeys are the members of a JSON-RPC 2.0 message.
var allowedKeys = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true}

// check returns what is wrong with one stdout line (raw, with its "\n").
func (v *validator) check(raw []byte) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if v.err != nil {
		bad("cannot load the ACP schema: %v", v.err)
	}
	line, ok := bytes.CutSuffix(raw, []byte("\n"))
	if !ok {
		bad("last line is not terminated by \\n")
	}
	if bytes.IndexByte(line, '\r') >= 0 {
		bad("line contains \\r (the bridge must write bare \\n)")
	}
	if !json.Valid(line) {
		bad("not valid JSON")
		return probs
	}
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' {
		bad("not a JSON object (batches and bare values are not ACP messages)")
		return probs
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		bad("decoding: %v", err)
		return probs
	}
	msg := doc.(map[string]any)
	for k := range msg {
		if !allowedKeys[k] {
			bad("unexpected top-level member %q", k)
		}
	}
	if msg["jsonrpc"] != "2.0" {
		bad(`"jsonrpc" is %v, want "2.0"`, msg["jsonrpc"])
	}
	if v2 := v.schemaV2(); v2 != nil {
		return append(probs, v.checkV2(v2, line)...) // v2editor_e2e_test.go
	}
	if v.schema == nil {
		return probs
	}
	s := v.schema
	validate := func(sch *jsonschema.Schema, what string, val any) {
		if err := sch.Validate(val); err != nil {
			bad("%s does not match the ACP schema: %s", what, truncate(err.Error(), 1500))
		}
	}
	id, hasID := msg["id"]
	method, hasMethod := msg["method"].(string)
	if _, present := msg["method"]; present && !hasMethod {
		bad(`"method" is not a string`)
		return probs
	}
	rawID := gjson.GetBytes(line, "id").Raw
	params, hasParams := msg["params"]

	switch {
	case hasMethod && hasID: // a request to the editor
		validate(s.requestID, "id", id)
		v.mu.Lock()
		v.toEditor[rawID] = true
		v.mu.Unlock()
		sch := s.toEditorRequests[method]
		if sch == nil && strings.HasPrefix(method, "_") {
			sch = s.extRequest
		}
		if sch == nil {
			bad("request to the editor has method %q, which is not an agent-to-client method of ACP v1", method)
			return probs
		}
		if !hasParams {
			params = nil
		}
		validate(sch, method+" params", params)

	case hasMethod: // a notification to the editor
		if method == "$/cancel_request" {
			// Not in this schema version (ACP spec, $/cancel_request).
			p, _ := params.(map[string]any)
			rid, ok := p["requestId"]
			if !ok {
				bad("$/cancel_request without params.requestId")
				return probs
			}
			validate(s.requestID, "$/cancel_request requestId", rid)
			ridRaw := gjson.GetBytes(line, "params.requestId").Raw
			v.mu.Lock()
			known := v.toEditor[ridRaw]
			v.mu.Unlock()
			if !known {
				bad("$/cancel_request for %s, which is not the id of a request the bridge sent the editor (ids are per hop)", ridRaw)
			}
			return probs
		}
		sch := s.toEditorNotifications[method]
		if method == "session/update" && gjson.GetBytes(line, "params.update.sessionUpdate").Str == "usage_update" {
			sch = s.usageUpdate
		}
		if sch == nil && strings.HasPrefix(method, "_") {
			sch = s.extNotify
		}
		if sch == nil {
			bad("notification to the editor has method %q, which is not an agent-to-client notification of ACP v1", method)
			return probs
		}
		if !hasParams {
			params = nil
		}
		validate(sch, method+" params", params)

	case hasID: // a response to an editor request
		validate(s.requestID, "id", id)
		res, hasResult := msg["result"]
		errObj, hasError := msg["error"]
		if hasResult == hasError {
			bad(`a response must carry exactly one of "result" and "error"`)
			return probs
		}
		v.mu.Lock()
		n := v.answered[rawID]
		v.answered[rawID] = n + 1
		v.mu.Unlock()
		reqMethod, sent := v.in.methodOf(rawID, n)
		if !sent {
			if _, everSent := v.in.methodOf(rawID, 0); everSent {
				bad("request id %s answered more often than the editor sent it (every request gets exactly one answer)", rawID)
			} else if hasResult {
				bad("result for id %s, which is not the byte-exact id of any request the editor sent", rawID)
			}
		}
		if hasError {
			validate(s.errorObj, "error", errObj)
			return probs
		}
		if !sent {
			return probs
		}
		sch := s.results[reqMethod]
		if sch == nil && strings.HasPrefix(reqMethod, "_") {
			sch = s.extResponse
		}
		if sch == nil && reqMethod == "session/delete" {
			// v1 since 2026-06 (schema: DeleteSessionRequest), newer than the SDK's
			// schema: its answer is an object, like session/close's.
			sch = s.results["session/close"]
		}
		if sch == nil {
			bad("result for a %q request, which has no ACP v1 response type", reqMethod)
			return probs
		}
		validate(sch, reqMethod+" result", res)

	default:
		bad(`message has neither "method" nor "id"`)
	}
	return probs
}

// TestSchema_Loads pins the schema plumbing itself: the types the relay
// tests depend on are found, and the validator rejects what it should.
func TestSchema_Loads(t *testing.T) {
	s, err := loadSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"fs/read_text_file", "fs/write_text_file", "terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/release", "session/request_permission"} {
		if s.toEditorRequests[m] == nil {
			t.Errorf("no request type for %s", m)
		}
	}
	in := &EditorInput{w: nopWriteCloser{}, sent: make(map[string][]string)}
	in.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{}}` + "\n"))
	v := newValidator(in)
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`, false}, // answered twice
		{`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`, false}, // never sent
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, true},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":"x","message":"Parse error"}}`, false}, // code not an integer
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`, true},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}`, false},
		{`{"jsonrpc":"2.0","method":"session/new","params":{}}`, false},
		{`{"jsonrpc":"1.0","method":"_x","params":{}}`, false},
		{`[{"jsonrpc":"2.0","method":"_x"}]`, false},
		{`{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"sessionId":"s","path":"/a"}}`, true},
		{`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}`, true},
		{`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":6}}`, false},
	} {
		probs := v.check([]byte(tc.line + "\n"))
		if got := len(probs) == 0; got != tc.ok {
			t.Errorf("check(%s) ok = %v, want %v; problems: %q", tc.line, got, tc.ok, probs)
		}
	}
	if probs := v.check([]byte(`{"jsonrpc":"2.0","method":"_x"}`)); len(probs) == 0 {
		t.Errorf("a line without \\n passed")
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

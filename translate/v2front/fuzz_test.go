package v2front

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzFront drives a Front with sequences the fuzzer chooses: editor
// messages (well-formed requests of every method the Front translates, and
// raw bytes), and an engine that answers the requests it was sent in any
// order, with results, errors and session updates of every kind. Whatever
// the sequence: every editor request is answered exactly once under its
// byte-exact id (once the engine has answered everything it was sent), every
// acknowledged prompt's user message is echoed under the acknowledgement's
// messageId before its session goes idle, every message for the editor is
// one line of JSON, and every message built from well-formed v1 input is
// valid v2.
func FuzzFront(f *testing.F) {
	for _, file := range []string{"turn", "cancel-error", "resume", "loadonly", "overlap"} {
		src, err := os.ReadFile("testdata/" + file + ".txt")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src[:min(len(src), 64)]) // bytes as choices: any slice will do
	}
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add(bytes.Repeat([]byte{3, 200, 7, 9, 250}, 20))
	f.Fuzz(func(t *testing.T, choices []byte) {
		runSequence(t, choices)
	})
}

// TestRandomSequences runs the fuzz property over many generated sequences
// in every go test, not only under -fuzz.
func TestRandomSequences(t *testing.T) {
	seed := uint64(1)
	for range 300 {
		choices := make([]byte, 200)
		for i := range choices {
			seed = seed*6364136223846793005 + 1442695040888963407
			choices[i] = byte(seed >> 56)
		}
		runSequence(t, choices)
		if t.Failed() {
			t.Logf("choices: %v", choices)
			return
		}
	}
}

var editorIDs = []string{`0`, `1`, `"a"`, `-5`, `9007199254740993`, `"acp-bridge/v2:1"`, `1.5`, `null`}

var v1Updates = []string{
	`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}`,
	`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"t"}}`,
	`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"u"},"messageId":"m1"}`,
	`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"T","kind":"edit","content":[{"type":"diff","path":"/w/a","newText":"n"}]}`,
	`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"diff","path":"/w/a","oldText":"o\n","newText":""}]}`,
	`{"sessionUpdate":"plan","entries":[{"content":"c","priority":"low","status":"pending"}]}`,
	`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"n","description":"d"},{"name":"i","description":"d","input":{"hint":"h"}}]}`,
	`{"sessionUpdate":"current_mode_update","currentModeId":"b"}`,
	`{"sessionUpdate":"config_option_update","configOptions":[{"id":"m","name":"M","type":"select","currentValue":"a","options":[{"value":"a","name":"A"}]}]}`,
	`{"sessionUpdate":"session_info_update","title":"T"}`,
	`{"sessionUpdate":"_vendor","x":[1]}`,
}

var v1Errors = []string{
	`{"code":-32002,"message":"Resource not found"}`,
	`{"code":-32602,"message":"unknown sessionId \"s\": gone","data":{"reason":"r"}}`,
	`{"code":-32603,"message":"boom","data":7}`,
	`{"code":-32800,"message":"Request cancelled"}`,
}

func runSequence(t *testing.T, choices []byte) {
	next := func() int {
		if len(choices) == 0 {
			return 0
		}
		c := int(choices[0])
		choices = choices[1:]
		return c
	}
	v := newChecker(t)
	fr := New()
	var pending []pend // engine-hop requests the engine has not answered
	var calls []string // engine calls to the editor, by raw id
	wellFormed := true // every input so far was well-formed
	answered := map[string]int{}
	sent := map[string]int{}
	nextCall := 100
	// The messageIds of acknowledged prompts by session, until the
	// session's idle, and the ids of the user messages echoed.
	acked := map[string][]string{}
	echoed := map[string]bool{}
	wantEchoed := func(sid string) {
		for _, id := range acked[sid] {
			if !echoed[id] {
				t.Fatalf("prompt acknowledged with messageId %q in session %s: no user_message carrying that id reached the editor", id, sid)
			}
		}
		delete(acked, sid)
	}

	check := func(outs []Out) {
		for _, o := range outs {
			switch o.To {
			case ToEditor:
				if bytes.ContainsAny(o.Frame, "\r\n") || !json.Valid(o.Frame) {
					t.Fatalf("not one line of JSON for the editor: %q", o.Frame)
				}
				r := gjson.ParseBytes(o.Frame)
				if id := r.Get("result.messageId"); id.Exists() && v.methods[r.Get("id").Raw] == "session/prompt" {
					acked[o.Session] = append(acked[o.Session], id.Str)
				}
				switch u := r.Get("params.update"); u.Get("sessionUpdate").Str {
				case "user_message", "user_message_chunk":
					echoed[u.Get("messageId").Str] = true
				case "state_update":
					if u.Get("state").Str == "idle" {
						wantEchoed(r.Get("params.sessionId").Str)
					}
				}
				if r.Get("method").Exists() {
					if r.Get("id").Exists() {
						calls = append(calls, r.Get("id").Raw)
					}
				} else if id := r.Get("id").Raw; r.Get("id").Exists() && id != "null" {
					answered[id]++
				}
				if wellFormed {
					v.toEditor(o.Frame)
				}
			case ToEngine:
				r := gjson.ParseBytes(o.Frame)
				if r.Get("method").Exists() && r.Get("id").Exists() {
					pending = append(pending, pend{r.Get("id").Raw, r.Get("method").Str})
				}
			}
		}
	}
	sessions := []string{"s1", "s2"}
	for len(choices) > 0 {
		sid := sessions[next()%len(sessions)]
		id := editorIDs[next()%len(editorIDs)]
		var msg, from string
		c := next() % 16
		if _, busy := v.methods[id]; busy && (c <= 4 || c == 7) {
			// An editor never reuses the id of a request still in
			// flight (the engine refuses it).
			continue
		}
		switch c {
		case 0:
			msg, from = `{"jsonrpc":"2.0","id":`+id+`,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"e","version":"1"}}}`, "editor"
		case 1:
			msg, from = `{"jsonrpc":"2.0","id":`+id+`,"method":"session/new","params":{"cwd":"/w"}}`, "editor"
		case 2:
			msg, from = `{"jsonrpc":"2.0","id":`+id+`,"method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"p"}]}}`, "editor"
		case 3:
			replay := ""
			if next()%2 == 0 {
				replay = `,"replayFrom":{"type":"start"}`
			}
			msg, from = `{"jsonrpc":"2.0","id":`+id+`,"method":"session/resume","params":{"sessionId":"`+sid+`","cwd":"/w"`+replay+`}}`, "editor"
		case 4:
			msg, from = `{"jsonrpc":"2.0","id":`+id+`,"method":"session/set_config_option","params":{"sessionId":"`+sid+`","configId":"mode","type":"id","value":"b"}}`, "editor"
		case 5:
			msg, from = `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"`+sid+`"}}`, "editor"
		case 6:
			msg, from = `{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":`+id+`}}`, "editor"
		case 7:
			msg, from = `{"jsonrpc":"2.0","id":`+id+`,"method":"session/close","params":{"sessionId":"`+sid+`"}}`, "editor"
		case 8:
			if len(calls) > 0 {
				msg, from = `{"jsonrpc":"2.0","id":`+calls[0]+`,"result":{"outcome":{"outcome":"cancelled"}}}`, "editor"
				calls = calls[1:]
			}
		case 9:
			// Raw bytes from the editor: the fuzzer's own.
			n := min(next()%16, len(choices))
			msg, from = string(choices[:n]), "editor"
			choices = choices[n:]
			wellFormed = wellFormed && json.Valid([]byte(msg))
		case 10, 11:
			msg, from = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`+sid+`","update":`+v1Updates[next()%len(v1Updates)]+`}}`, "engine"
		case 12:
			nextCall++
			msg, from = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/request_permission","params":{"sessionId":"%s","toolCall":{"toolCallId":"t1","title":"T"},"options":[{"optionId":"y","name":"Y","kind":"allow_once"}]}}`, nextCall, sid), "engine"
		case 13:
			nextCall++
			msg, from = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"terminal/create","params":{"sessionId":"%s","command":"ls"}}`, nextCall, sid), "engine"
		default:
			if len(pending) == 0 {
				continue
			}
			i := next() % len(pending)
			p := pending[i]
			pending = append(pending[:i], pending[i+1:]...)
			msg, from = engineAnswer(p, sid, next()), "engine"
		}
		if msg == "" {
			continue
		}
		if from == "editor" {
			r := gjson.Parse(msg)
			if json.Valid([]byte(msg)) && r.Get("method").Exists() && r.Get("id").Exists() {
				v.editorSent([]byte(msg))
				sent[r.Get("id").Raw]++
			}
			check(fr.FromEditor([]byte(msg)))
		} else {
			check(fr.FromEngine([]byte(msg)))
		}
	}
	// The engine answers whatever it still owes.
	for len(pending) > 0 {
		p := pending[0]
		pending = pending[1:]
		check(fr.FromEngine([]byte(engineAnswer(p, "s1", 0))))
	}
	for sid := range acked {
		wantEchoed(sid)
	}
	for id, n := range sent {
		if id == "null" {
			continue
		}
		if answered[id] != n {
			t.Fatalf("editor id %s sent %d times, answered %d times", id, n, answered[id])
		}
	}
	for id, n := range answered {
		if n > sent[id] && !strings.HasPrefix(id, `"acp-bridge/v2:`) {
			t.Fatalf("editor id %s answered %d times, sent %d times", id, n, sent[id])
		}
	}
}

type pend struct{ id, method string }

// engineAnswer is a v1 answer to the engine-hop request p, an error or the
// result its method has, chosen by c.
func engineAnswer(p pend, sid string, c int) string {
	if c%3 == 2 {
		return `{"jsonrpc":"2.0","id":` + p.id + `,"error":` + v1Errors[c%len(v1Errors)] + `}`
	}
	result := `{}`
	switch p.method {
	case "initialize":
		result = `{"protocolVersion":1,"agentCapabilities":{"loadSession":` + fmt.Sprint(c%2 == 0) + `},"agentInfo":{"name":"a","version":"1"}}`
	case "session/new", "session/load", "session/resume":
		result = `{"sessionId":"` + sid + `","modes":{"currentModeId":"a","availableModes":[{"id":"a","name":"A"},{"id":"b","name":"B"}]}}`
	case "session/prompt":
		result = []string{`{"stopReason":"end_turn"}`, `{"stopReason":"cancelled"}`, `{"stopReason":"_vendor"}`}[c%3]
	case "session/set_config_option":
		result = `{"configOptions":[]}`
	}
	return `{"jsonrpc":"2.0","id":` + p.id + `,"result":` + result + `}`
}

package fakerules

import (
	"encoding/json"
	"io"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// OpenInterpreter is `interpreter --server` with auth on and auto_run off for
// code the prompt asks to approve (docs/agent-protocols.md#open-interpreter):
// the first frame must be {"auth":KEY}; a prompt is the user start/message/end
// triple; commands are the command start/content/end triple.
func OpenInterpreter(key string) fakeagent.ServeFunc {
	return func(r io.Reader, w io.Writer, opt fakeagent.Options) error {
		c := newConn(r, w, opt)
		first, ok := <-c.in
		if !ok {
			return nil
		}
		var auth struct {
			Auth *string `json:"auth"`
		}
		if json.Unmarshal(first, &auth) != nil || auth.Auth == nil || *auth.Auth != key {
			c.send(`{"auth":false}`)
			for range c.in {
				c.send(`{"auth":false}`)
			}
			return nil
		}
		c.send(`{"auth":true}`)
		// triple reads a start/content/end triple of role user and kind typ.
		triple := func(typ string) (string, []string, bool) {
			var got []string
			var content string
			for i := 0; i < 3; i++ {
				l, ok := <-c.in
				if !ok {
					return "", got, false
				}
				got = append(got, string(l))
				var m map[string]any
				_ = json.Unmarshal(l, &m)
				if s, ok := m["content"].(string); ok {
					content = s
				}
			}
			want := []string{`{"role":"user","start":true}`, `{"role":"user","type":"message","content":`, `{"role":"user","end":true}`}
			if typ == "command" {
				want = []string{`{"role":"user","type":"command","start":true}`, `{"role":"user","type":"command","content":`, `{"role":"user","type":"command","end":true}`}
			}
			for i, wnt := range want {
				if len(got[i]) < len(wnt) || got[i][:len(wnt)] != wnt {
					c.send(`{"role":"server","type":"error","content":"unexpected frame ` + q(got[i])[1:len(q(got[i]))-1] + `"}`)
					return content, got, false
				}
			}
			return content, got, true
		}
		msg := func(parts ...string) {
			c.send(`{"role":"assistant","type":"message","start":true}`)
			for _, p := range parts {
				c.send(`{"role":"assistant","type":"message","content":` + q(p) + `}`)
			}
			c.send(`{"role":"assistant","type":"message","end":true}`)
		}
		code := func(format, src string) {
			c.send(`{"role":"assistant","type":"code","format":"` + format + `","start":true}`)
			c.send(`{"role":"assistant","type":"code","format":"` + format + `","content":` + q(src) + `}`)
			c.send(`{"role":"assistant","type":"code","format":"` + format + `","end":true}`)
		}
		complete := `{"role":"server","type":"status","content":"complete"}`
		for {
			text, frames, ok := triple("message")
			if !ok {
				return nil
			}
			switch word(text) {
			case "hello":
				msg("You said: ", text)
			case "tool":
				msg("Let me", " check.")
				code("shell", "ls")
				c.send(`{"role":"computer","type":"console","format":"active_line","content":1}`)
				c.send(`{"role":"computer","type":"console","format":"output","content":"a.txt\n"}`)
			case "approve":
				code("shell", "rm -r tmp")
				c.send(complete)
				cmd, _, ok := triple("command")
				if !ok {
					return nil
				}
				if cmd == "go" {
					c.send(`{"role":"computer","type":"console","format":"output","content":"removed\n"}`)
					msg("Done.")
				}
			case "echo":
				b, _ := json.Marshal(frames)
				msg(string(b))
			case "fail":
				msg("Working")
				c.send(`{"role":"server","type":"error","content":"Traceback (most recent call last): ZeroDivisionError: division by zero"}`)
			case "die":
				msg("Working")
				opt.Die()
				return nil
			case "slow":
				msg("working")
				// Wait for the stop command, as a long run would.
				if cmd, _, ok := triple("command"); !ok || cmd != "stop" {
					return nil
				}
			}
			c.send(complete)
		}
	}
}

package fakerules

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// Tinychat is the made-up WebSocket chat format of docs/bridge-your-agent.md:
//
//	S→C {"event":"hello","server":"tinychat"}                       on connect
//	C→S {"op":"open","cwd":"/path"}          S→C {"event":"opened","conv":"c-1"}
//	C→S {"op":"ask","conv":"c-1","text":"…"}
//	S→C {"event":"token","conv":"c-1","text":"…"}                    streamed
//	S→C {"event":"tool","conv":"c-1","call":"t1","name":"grep","input":{…}}
//	S→C {"event":"tool_done","conv":"c-1","call":"t1","output":"…"}
//	S→C {"event":"done","conv":"c-1","reason":"stop"|"stopped"}      turn over
//	S→C {"event":"error","conv":"c-1","message":"…"}                 turn failed
//	C→S {"op":"stop","conv":"c-1"}                                   cancel
//
// A "stubborn" prompt (and a "Write …" one) streams a token, answers the stop with an error (the
// agent no longer knows the run it is told to stop) and then finishes the
// run anyway: 40 tokens, a tool call, done.
func Tinychat(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	c.send(`{"event":"hello","server":"tinychat"}`)
	convs := 0
	for line := range c.in {
		var m struct{ Op, Cwd, Conv, Text string }
		if json.Unmarshal(line, &m) != nil {
			c.send(`{"event":"error","message":"bad json"}`)
			continue
		}
		send := func(kind, rest string) {
			s := `{"event":"` + kind + `","conv":` + q(m.Conv)
			if rest != "" {
				s += "," + rest
			}
			c.send(s + "}")
		}
		switch m.Op {
		case "open":
			if m.Cwd == "" {
				c.send(`{"event":"error","message":"open needs cwd"}`)
				continue
			}
			convs++
			c.send(`{"event":"opened","conv":"c-` + strconv.Itoa(convs) + `"}`)
		case "ask":
			switch word(m.Text) {
			case "hello":
				send("token", `"text":"You said: "`)
				send("token", `"text":`+q(m.Text))
			case "tool":
				send("tool", `"call":"t1","name":"grep","input":{"pattern":"TODO"}`)
				send("tool_done", `"call":"t1","output":"main.go:3: TODO"`)
				send("token", `"text":"Found it"`)
			case "echo":
				send("token", `"text":`+q(string(line)))
			case "fail":
				send("error", `"message":"out of tokens"`)
				continue
			case "die":
				send("token", `"text":"working"`)
				opt.Die()
				return nil
			case "stubborn", "Write":
				// "Write a long story", acp-bridge check's long prompt, too:
				// the check of the walk-through (docs/bridge-your-agent.md) meets this agent's
				// refused stop.
				send("token", `"text":"working"`)
				for l := range c.in {
					var s struct{ Op string }
					if json.Unmarshal(l, &s) == nil && s.Op == "stop" {
						break
					}
				}
				send("error", `"message":"no running chat 2"`)
				for i := range 40 {
					send("token", `"text":"late `+strconv.Itoa(i)+`"`)
				}
				send("tool", `"call":"t9","name":"grep","input":{}`)
			case "slow":
				send("token", `"text":"working"`)
				deadline := time.After(5 * time.Second)
			wait:
				for {
					select {
					case l, ok := <-c.in:
						if !ok {
							return nil
						}
						var s struct{ Op string }
						if json.Unmarshal(l, &s) == nil && s.Op == "stop" {
							break wait
						}
					case <-deadline:
						break wait
					}
				}
				send("done", `"reason":"stopped"`)
				continue
			}
			send("done", `"reason":"stop"`)
		case "stop":
		default:
			c.send(`{"event":"error","message":"unknown op"}`)
		}
	}
	return nil
}

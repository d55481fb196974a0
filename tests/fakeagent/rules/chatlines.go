package fakerules

import (
	"encoding/json"
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// ChatLines is the line-oriented chat agent of the chat-lines profile: it
// reads {"message":…,"cwd":…} lines and writes {"kind":…} lines, with no
// end-of-turn marker. {"kind":"interrupt"} stops a running answer.
func ChatLines(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	for line := range c.in {
		var m struct {
			Message *string `json:"message"`
			Cwd     string  `json:"cwd"`
			Kind    string  `json:"kind"`
		}
		if json.Unmarshal(line, &m) != nil || (m.Message == nil && m.Kind != "interrupt") {
			c.send(`{"kind":"error","text":"bad line"}`)
			continue
		}
		if m.Message == nil {
			continue
		}
		text := *m.Message
		switch word(text) {
		case "hello":
			c.send(`{"kind":"thought","text":"greeting"}`)
			c.send(`{"kind":"plan","entries":[{"content":"answer","priority":"high","status":"in_progress"}]}`)
			c.send(`{"kind":"delta","text":"You said: "}`)
			c.send(`{"kind":"delta","text":` + q(text) + `}`)
		case "echo":
			c.send(`{"kind":"delta","text":` + q(string(line)) + `}`)
		case "fail":
			c.send(`{"kind":"error","text":"no model configured"}`)
		case "die":
			c.send(`{"kind":"delta","text":"working"}`)
			opt.Die()
			return nil
		case "slow":
			// Stream until interrupted, every 200 ms (inside the silence).
			tick := time.NewTicker(200 * time.Millisecond)
			deadline := time.After(5 * time.Second)
		loop:
			for {
				select {
				case l, ok := <-c.in:
					if !ok {
						return nil
					}
					var im struct{ Kind string }
					if json.Unmarshal(l, &im) == nil && im.Kind == "interrupt" {
						break loop
					}
				case <-tick.C:
					c.send(`{"kind":"delta","text":"."}`)
				case <-deadline:
					break loop
				}
			}
			tick.Stop()
		}
	}
	return nil
}

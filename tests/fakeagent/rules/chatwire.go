package fakerules

import (
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// Chatwire is a made-up WebSocket chat format whose client picks a chat id
// per prompt, the case rule profiles' turn scope is for:
//
//	C→S {"type":"chat","chat_id":"…","message":"…"}      chat_id new every time
//	S→C {"type":"delta","chat_id":"…","text":"…"}          streamed
//	S→C {"type":"tool_use","chat_id":"…","use_id":"u1","tool":"grep","input":{…}}
//	S→C {"type":"tool_result","chat_id":"…","use_id":"u1","output":"…"}
//	S→C {"type":"final","chat_id":"…"}                      turn over
//	S→C {"type":"error","chat_id":"…","message":"…"}        turn failed
//	C→S {"cmd":"stop","chat_id":"…"}                        stop that chat
//	S→C {"type":"stopped","chat_id":"…"}                    the stop accepted
//
// Like many real agents it numbers tool uses per chat (u1 every time), and
// it is strict: a chat id used before, or a stop naming a chat that is not
// running, is answered with an error frame. Prompts by their first word:
//
//	hello     two deltas, final
//	tool      a tool use and its result, a delta, final
//	slow      a delta, then waits for the stop: stopped, then (late) final
//	stubborn  a delta, then refuses the stop with an error, and goes on:
//	          20 deltas, a tool use, final
//	linger    a delta, final; at the next chat, first a late delta of this one
//	deaf      a delta; takes a stop without a word, then 3 s later a delta, final
//	fail      an error frame
//	echo      a delta holding the exact chat frame received
//	die       a delta, then the connection drops
func Chatwire(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	var mu sync.Mutex
	used := map[string]bool{}
	running := map[string]chan struct{}{} // chat id → its stop
	lingering := ""
	for line := range c.in {
		var m struct {
			Type, Cmd, Message string
			ChatID             string `json:"chat_id"`
		}
		err := json.Unmarshal(line, &m)
		switch {
		case err == nil && m.Cmd == "stop":
			mu.Lock()
			stop, ok := running[m.ChatID]
			if ok {
				delete(running, m.ChatID)
			}
			mu.Unlock()
			if !ok {
				c.send(`{"type":"error","chat_id":` + q(m.ChatID) + `,"message":"no running chat ` + m.ChatID + `"}`)
				continue
			}
			close(stop)
			continue
		case err != nil || m.Type != "chat" || m.ChatID == "":
			c.send(`{"type":"error","message":"want {\"type\":\"chat\",\"chat_id\":…,\"message\":…}"}`)
			continue
		}
		id := m.ChatID
		if used[id] {
			c.send(`{"type":"error","chat_id":` + q(id) + `,"message":"chat id ` + id + ` was used before"}`)
			continue
		}
		used[id] = true
		if lingering != "" {
			c.send(`{"type":"delta","chat_id":` + q(lingering) + `,"text":"late from an earlier chat"}`)
			lingering = ""
		}
		stop := make(chan struct{})
		mu.Lock()
		running[id] = stop
		mu.Unlock()
		end := func() {
			mu.Lock()
			delete(running, id)
			mu.Unlock()
		}
		if word(m.Message) == "linger" {
			lingering = id
		}
		if word(m.Message) == "die" {
			chatwireTurn(c, id, m.Message, line, stop, end)
			opt.Die()
			return nil
		}
		go chatwireTurn(c, id, m.Message, line, stop, end)
	}
	return nil
}

// chatwireTurn plays one chat; stop is closed when the client stops it,
// end is called once the chat no longer runs.
func chatwireTurn(c *conn, id, message string, line []byte, stop chan struct{}, end func()) {
	send := func(kind, rest string) {
		s := `{"type":"` + kind + `","chat_id":` + q(id)
		if rest != "" {
			s += "," + rest
		}
		c.send(s + "}")
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	switch word(message) {
	case "hello":
		send("delta", `"text":"You said: "`)
		send("delta", `"text":`+q(message))
	case "tool":
		send("tool_use", `"use_id":"u1","tool":"grep","input":{"pattern":"TODO"}`)
		send("tool_result", `"use_id":"u1","output":"main.go:3: TODO"`)
		send("delta", `"text":"Found it"`)
	case "echo":
		send("delta", `"text":`+q(string(line)))
	case "slow":
		send("delta", `"text":"working"`)
		if stopped() {
			send("stopped", "")
		}
	case "stubborn":
		send("delta", `"text":"working"`)
		if stopped() {
			send("error", `"message":"stop refused: chat `+id+` is busy"`)
		}
		for i := range 20 {
			send("delta", `"text":"late `+strconv.Itoa(i)+`"`)
		}
		send("tool_use", `"use_id":"u9","tool":"grep","input":{}`)
	case "linger":
		send("delta", `"text":"first"`)
	case "deaf":
		// Takes the stop and says nothing about it, then finishes late.
		send("delta", `"text":"working"`)
		if stopped() {
			time.Sleep(3 * time.Second)
		}
		send("delta", `"text":"late"`)
	case "fail":
		end()
		send("error", `"message":"out of credits"`)
		return
	case "die":
		send("delta", `"text":"working"`)
		end()
		return
	}
	end()
	send("final", "")
}

package bridge_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate/rules"
)

// A profile with a typo'd match: the first frame no rule matches is logged
// at WARN at once, with its session, and when the turn has gone the default
// quiet (30 s) without a matched frame, a WARN names that frame. The clock
// is the engine's: the translator only asked for a Timer.
func TestRulesTypoWarns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, diags := rules.Parse("typo.hcl", []byte(`
request "session/prompt" {
  send = { ask = prompt.text }
}
event "delta" {
  match   = { kind = "detla" }
  message = frame.text
}
`))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		newTranslator, diags := p.Dialect().Configure(nil)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		var log syncBuffer
		agent := newMemLink()
		b := &bridge.Bridge{
			Dialect:       p.Dialect(),
			NewTranslator: newTranslator,
			Logger:        hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info, DisableTime: true}),
			Dial:          func(context.Context, bridge.Spawn) (bridge.Link, error) { return agent, nil },
		}
		h := serve(t, b)
		defer h.close()
		h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`)
		h.recv()
		h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`)
		sid := gjson.Get(h.recv(), "result.sessionId").Str
		h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
		<-agent.toAgent
		start := time.Now()
		agent.fromAgent <- []byte(`{"kind":"delta","text":"Hello"}`)
		agent.fromAgent <- []byte(`{"kind":"delta","text":" there"}`)
		synctest.Wait()
		if n := strings.Count(log.String(), "[WARN]"); n != 1 || !strings.Contains(log.String(), "matched no rule of the profile") ||
			!strings.Contains(log.String(), "session="+sid) {
			t.Fatalf("after two unmatched frames, %d WARN lines, want one naming the session:\n%s", n, log.String())
		}

		time.Sleep(30*time.Second - time.Nanosecond)
		synctest.Wait()
		if strings.Contains(log.String(), "turn without a frame") {
			t.Fatalf("quiet warning before 30 s:\n%s", log.String())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !strings.Contains(log.String(), "turn without a frame the profile matched: session="+sid) ||
			!strings.Contains(log.String(), `\"text\":\" there\"`) || time.Since(start) != 30*time.Second {
			t.Fatalf("no quiet warning naming the last unmatched frame after %v:\n%s", time.Since(start), log.String())
		}
		// The profile, not the stream, is at fault: the frames are not
		// repairs, and the summary at exit does not list them as such.
		agent.die(nil)
		h.close()
		if strings.Contains(log.String(), "unmatched-frames=") {
			t.Errorf("unmatched frames summarised as repairs:\n%s", log.String())
		}
	})
}

package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// FuzzServe feeds the engine arbitrary editor input, with an agent that
// answers every request at once or, for prompts, never, and checks the
// engine's promises: every output line is one JSON-RPC message, every editor
// request is answered exactly once (at shutdown at the latest), and
// notifications and responses are never answered.
func FuzzServe(f *testing.F) {
	for _, s := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"/\",\"mcpServers\":[]}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"s\",\"prompt\":[]}}\n{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"s\"}}\n",
		"not json\n{\"jsonrpc\":\"2.0\",\"id\":\"a\"}\n[1]\n\r\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"_x\",\"params\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":0}}\n",
		// A v2 editor: the v2 front translates both ways.
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":2,\"info\":{\"name\":\"e\",\"version\":\"1\"}}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/new\",\"params\":{\"cwd\":\"/\"}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"s\",\"prompt\":[{\"type\":\"text\",\"text\":\"x\"}]}}\n{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":1}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/resume\",\"params\":{\"sessionId\":\"s\",\"cwd\":\"/\",\"replayFrom\":{\"type\":\"start\"}}}\n",
		// Hostile: nesting past any parser's stack, bytes that are not
		// UTF-8 in a request with a usable id.
		"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n" + strings.Repeat("[", 30000) + "\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"_x\",\"params\":{\"t\":\"\xff\"}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		var out bytes.Buffer
		defer func() {
			if t.Failed() {
				t.Logf("output:\n%s", out.String())
			}
		}()
		newTr, _ := acp.Dialect.Configure(nil)
		var wg sync.WaitGroup
		b := &bridge.Bridge{
			Dialect:       acp.Dialect,
			NewTranslator: newTr,
			CancelGrace:   time.Millisecond,
			Dial: func(ctx context.Context, s bridge.Spawn) (bridge.Link, error) {
				l := newMemLink()
				wg.Add(1)
				go func() { defer wg.Done(); autoAnswer(l) }()
				return l, nil
			},
		}
		if err := b.Serve(context.Background(), bytes.NewReader(input), &out); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		wg.Wait()

		checkAnswers(t, input, out.Bytes())
	})
}

// autoAnswer plays an agent that answers every request except prompts.
func autoAnswer(l *memLink) {
	for {
		select {
		case f := <-l.toAgent:
			env, err := translate.ParseEnvelope(f)
			if err != nil || !env.IsRequest() || env.Method == "session/prompt" {
				continue
			}
			result := `{}`
			switch env.Method {
			case "initialize":
				result = `{"protocolVersion":1}`
			case "session/new":
				result = `{"sessionId":"s"}`
			}
			select {
			case l.fromAgent <- translate.ResultFrame(env.ID, json.RawMessage(result)):
			case <-l.closed:
				return
			}
		case <-l.closed:
			return
		}
	}
}

package trace

import (
	"bytes"
	"encoding/json"
	"testing"
)

// A turn is one invoke_agent span from the editor's session/prompt to its
// answer; a tool call is one execute_tool span under it, from tool_call to
// the update that completes or fails it; ids are valid OTLP hex ids, and
// no message text is exported.
func TestWriteOTLP(t *testing.T) {
	mk := func(dir, at, msg string) Record {
		r := Record{Hop: "editor", Dir: dir, Time: at}
		Classify(&r, []byte(msg))
		return r
	}
	recs := []Record{
		mk("in", "2026-01-01T00:00:00Z", `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s-1","prompt":[{"type":"text","text":"secret words"}]}}`),
		mk("out", "2026-01-01T00:00:01Z", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read secret.txt","kind":"read","status":"pending","_meta":{"acpBridge":{"toolName":"read_file"}}}}}`),
		mk("out", "2026-01-01T00:00:02Z", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"failed"}}}`),
		// Claude Code's name for its tool, and a call with no name but its kind.
		mk("out", "2026-01-01T00:00:02Z", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c2","title":"ls -la","kind":"execute","status":"pending","_meta":{"claudeCode":{"toolName":"Bash"}}}}}`),
		mk("out", "2026-01-01T00:00:02Z", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"tool_call","toolCallId":"c3","title":"Fetch it","kind":"fetch","status":"pending"}}}`),
		mk("out", "2026-01-01T00:00:03Z", `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`),
		{Hop: "agent", Dir: "in", Kind: KindResponse, Msg: json.RawMessage(`{"id":1,"result":{}}`)}, // the agent hop is not a turn
	}
	var b bytes.Buffer
	if err := WriteOTLP(&b, "acp-bridge", recs); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b.Bytes(), []byte("secret words")) || bytes.Contains(b.Bytes(), []byte("secret.txt")) {
		t.Fatal("prompt text or a tool call's title exported")
	}
	var doc struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					TraceID, SpanID, ParentSpanID, Name string
					Start                               string `json:"startTimeUnixNano"`
					End                                 string `json:"endTimeUnixNano"`
					Attributes                          []struct {
						Key   string
						Value struct{ StringValue string }
					}
					Status *struct{ Code int }
				}
			}
		}
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	spans := doc.ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4\n%s", len(spans), b.String())
	}
	turn, tool := spans[0], spans[1]
	attr := func(i int, k string) string {
		for _, a := range spans[i].Attributes {
			if a.Key == k {
				return a.Value.StringValue
			}
		}
		return ""
	}
	if turn.Name != "invoke_agent" || attr(0, "gen_ai.operation.name") != "invoke_agent" || attr(0, "gen_ai.conversation.id") != "s-1" ||
		attr(0, "gen_ai.response.finish_reasons") != "end_turn" || turn.Start != "1767225600000000000" || turn.End != "1767225603000000000" {
		t.Errorf("turn span %+v", turn)
	}
	// GenAI: the span is "execute_tool {gen_ai.tool.name}", the tool's name.
	for i, want := range map[int]string{1: "read_file", 2: "Bash", 3: "fetch"} {
		if spans[i].Name != "execute_tool "+want || attr(i, "gen_ai.tool.name") != want {
			t.Errorf("tool span %d is %q with gen_ai.tool.name %q; want execute_tool %s", i, spans[i].Name, attr(i, "gen_ai.tool.name"), want)
		}
	}
	if tool.ParentSpanID != turn.SpanID || tool.TraceID != turn.TraceID || attr(1, "acp.tool_call.kind") != "read" ||
		attr(1, "gen_ai.tool.call.id") != "c1" || tool.Status == nil || tool.Status.Code != 2 ||
		tool.End != "1767225602000000000" {
		t.Errorf("tool span %+v (turn %s)", tool, turn.SpanID)
	}
	if len(turn.TraceID) != 32 || len(turn.SpanID) != 16 {
		t.Errorf("ids %q %q: OTLP/JSON wants 32 and 16 hex digits", turn.TraceID, turn.SpanID)
	}
}

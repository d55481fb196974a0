package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// WriteOTLP writes recs as OpenTelemetry spans in the OTLP/JSON encoding
// (an ExportTraceServiceRequest, as an OTLP file exporter or collector's
// file receiver reads it), following the GenAI semantic conventions: one
// span per turn ("invoke_agent", from the editor's session/prompt to its
// answer) and, under it, one per tool call ("execute_tool NAME", named by
// the tool's name (see toolName), from the tool_call update to the
// tool_call_update that completes or fails it).
// Every session is one trace. Only what the trace holds is exported: ids,
// kinds, statuses, times; never prompt or message text.
func WriteOTLP(w io.Writer, service string, recs []Record) error {
	var spans []otlpSpan
	type turn struct {
		span    int // index in spans
		session string
	}
	turns := map[string]turn{}  // the prompt's id on the editor hop
	current := map[string]int{} // session → its running turn's span index
	tools := map[string]int{}   // session + "\x00" + toolCallId → span index
	wall := func(r Record) string {
		if t, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
			return strconv.FormatInt(t.UnixNano(), 10)
		}
		return strconv.FormatInt(r.TNs, 10)
	}
	for _, r := range recs {
		if r.Hop != "editor" || len(r.Msg) == 0 {
			continue
		}
		switch {
		case r.Kind == KindRequest && r.Dir == "in" && r.Method == "session/prompt":
			sid := gjson.GetBytes(r.Msg, "params.sessionId").Str
			s := otlpSpan{
				TraceID: hexID(sid, 16), SpanID: hexID(sid+"\x00turn\x00"+string(r.ID)+"\x00"+r.Time, 8),
				Name: "invoke_agent", Kind: 3, Start: wall(r), End: wall(r),
				Attributes: attrs("gen_ai.operation.name", "invoke_agent", "gen_ai.conversation.id", sid, "gen_ai.system", service),
			}
			turns[string(r.ID)] = turn{len(spans), sid}
			current[sid] = len(spans)
			spans = append(spans, s)
		case (r.Kind == KindResponse || r.Kind == KindError) && r.Dir == "out":
			t, ok := turns[string(r.ID)]
			if !ok {
				continue
			}
			delete(turns, string(r.ID))
			s := &spans[t.span]
			s.End = wall(r)
			if stop := gjson.GetBytes(r.Msg, "result.stopReason").Str; stop != "" {
				s.Attributes = append(s.Attributes, attrs("gen_ai.response.finish_reasons", stop)...)
			}
			if r.Kind == KindError {
				s.Status = &otlpStatus{Code: 2, Message: gjson.GetBytes(r.Msg, "error.message").Str}
			}
			if current[t.session] == t.span {
				delete(current, t.session)
			}
		case r.Kind == KindNotification && r.Dir == "out" && r.Method == "session/update":
			sid := gjson.GetBytes(r.Msg, "params.sessionId").Str
			u := gjson.GetBytes(r.Msg, "params.update")
			id := u.Get("toolCallId").Str
			if id == "" {
				continue
			}
			key := sid + "\x00" + id
			switch u.Get("sessionUpdate").Str {
			case "tool_call":
				parent := ""
				if i, ok := current[sid]; ok {
					parent = spans[i].SpanID
				}
				tools[key] = len(spans)
				name := toolName(u)
				spans = append(spans, otlpSpan{
					TraceID: hexID(sid, 16), SpanID: hexID(key+"\x00"+r.Time, 8), ParentSpanID: parent,
					Name: "execute_tool " + name, Kind: 1, Start: wall(r), End: wall(r),
					Attributes: attrs("gen_ai.operation.name", "execute_tool", "gen_ai.tool.call.id", id,
						"gen_ai.tool.name", name, "acp.tool_call.kind", u.Get("kind").Str, "gen_ai.conversation.id", sid),
				})
			case "tool_call_update":
				i, ok := tools[key]
				if !ok {
					continue
				}
				spans[i].End = wall(r)
				switch u.Get("status").Str {
				case "completed":
					delete(tools, key)
				case "failed":
					spans[i].Status = &otlpStatus{Code: 2, Message: "tool call failed"}
					delete(tools, key)
				}
			}
		}
	}
	req := map[string]any{"resourceSpans": []any{map[string]any{
		"resource": map[string]any{"attributes": attrs("service.name", service)},
		"scopeSpans": []any{map[string]any{
			"scope": map[string]any{"name": "github.com/acp-bridge/acp-bridge/toolkit/trace"},
			"spans": spans,
		}},
	}}}
	enc := json.NewEncoder(w)
	return enc.Encode(req)
}

// toolName is the name of the tool a tool_call update runs, for its
// span (GenAI's "execute_tool {gen_ai.tool.name}"): the agent's own name
// for it where the update carries one in _meta (claude-agent-acp's
// _meta.claudeCode.toolName, a rule profile's _meta.acpBridge.toolName),
// else its ACP kind ("read", "execute"), else "tool". Never the title,
// which is for people and may quote the call's input.
func toolName(u gjson.Result) string {
	name := u.Get("_meta.toolName").Str
	if name == "" {
		u.Get("_meta").ForEach(func(_, ns gjson.Result) bool {
			name = ns.Get("toolName").Str
			return name == ""
		})
	}
	if name == "" {
		name = u.Get("kind").Str
	}
	if name == "" {
		name = "tool"
	}
	return name
}

type otlpSpan struct {
	TraceID      string      `json:"traceId"`
	SpanID       string      `json:"spanId"`
	ParentSpanID string      `json:"parentSpanId,omitempty"`
	Name         string      `json:"name"`
	Kind         int         `json:"kind"` // 1 internal, 3 client
	Start        string      `json:"startTimeUnixNano"`
	End          string      `json:"endTimeUnixNano"`
	Attributes   []otlpAttr  `json:"attributes"`
	Status       *otlpStatus `json:"status,omitempty"`
}

type otlpAttr struct {
	Key   string            `json:"key"`
	Value map[string]string `json:"value"`
}

type otlpStatus struct {
	Code    int    `json:"code"` // 2: error
	Message string `json:"message,omitempty"`
}

// attrs turns key, value pairs into string attributes, leaving out empty
// values.
func attrs(kv ...string) []otlpAttr {
	var out []otlpAttr
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			out = append(out, otlpAttr{Key: kv[i], Value: map[string]string{"stringValue": kv[i+1]}})
		}
	}
	return out
}

// hexID derives a stable id of n bytes from s, in hex (OTLP/JSON writes
// trace and span ids as hex); an all-zero id, which OTLP reads as none,
// is made non-zero.
func hexID(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	b := sum[:n]
	if allZero(b) {
		b[0] = 1
	}
	return hex.EncodeToString(b)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

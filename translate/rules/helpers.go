// Small helpers of the translator: the prompt's text, frames and their
// outputs, replies and errors, and the template environment.

package rules

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// promptText joins the prompt's text blocks with newlines; a resource link
// becomes its path (file:// URIs) or URI, an embedded text resource its text.
func promptText(params []byte) string {
	var b strings.Builder
	gjson.GetBytes(params, "prompt").ForEach(func(_, blk gjson.Result) bool {
		var s string
		switch blk.Get("type").Str {
		case "text":
			s = blk.Get("text").Str
		case "resource_link":
			s = strings.TrimPrefix(blk.Get("uri").Str, "file://")
		case "resource":
			s = blk.Get("resource.text").Str
		}
		if s == "" {
			return true
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s)
		return true
	})
	return b.String()
}

// unsupportedBlock names the first prompt block a text profile cannot send.
func unsupportedBlock(params []byte) string {
	bad := ""
	gjson.GetBytes(params, "prompt").ForEach(func(_, blk gjson.Result) bool {
		switch typ := blk.Get("type").Str; typ {
		case "text", "resource_link":
		case "resource":
			if !blk.Get("resource.text").Exists() {
				bad = "binary resource"
			}
		default:
			bad = typ
		}
		return bad == ""
	})
	return bad
}

func frameOut(b []byte) translate.Out { return translate.Out{Kind: translate.Frame, Body: b} }

func frameOuts(frames [][]byte) []translate.Out {
	outs := make([]translate.Out, len(frames))
	for i, f := range frames {
		outs[i] = frameOut(f)
	}
	return outs
}

// evalFrames builds the frames of nodes. With fresh, each frame gets a new
// id (heartbeats, answers); else they share e.id (one request's frames). A
// for expression yields one frame per element.
func (t *translator) evalFrames(nodes []node, e *evalEnv, fresh bool) [][]byte {
	var out [][]byte
	for _, n := range nodes {
		if fresh {
			t.nextID++
			e.id = t.nextID
		}
		sp, spread := n.(*spreadNode)
		if spread {
			n = sp.inner
		}
		v := n.eval(e)
		if v.absent() {
			continue
		}
		if !spread {
			out = append(out, v.appendJSON(nil))
			continue
		}
		gjson.ParseBytes(v.raw).ForEach(func(_, el gjson.Result) bool {
			out = append(out, []byte(el.Raw))
			return true
		})
	}
	return out
}

// spreadNode marks a for expression whose elements are separate frames.
type spreadNode struct{ inner node }

func (n *spreadNode) eval(e *evalEnv) value { return n.inner.eval(e) }

func reply(ref translate.Ref, body []byte, session string) translate.Out {
	return translate.Out{Kind: translate.Reply, Ref: ref, Body: body, Session: session}
}

func fail(ref translate.Ref, errObj []byte) translate.Out {
	return translate.Out{Kind: translate.Fail, Ref: ref, Body: errObj}
}

func failf(ref translate.Ref, code int, format string, args ...any) translate.Out {
	return fail(ref, translate.Errorf(code, format, args...).JSON())
}

func stopReasonBody(reason string) []byte {
	return []byte(`{"stopReason":"` + reason + `"}`)
}

// passError returns the agent's JSON-RPC error object for the editor: as it
// is (compacted) when it has an integer code and a string message, else
// wrapped in a -32603 that carries it.
func passError(raw []byte) []byte {
	r := gjson.ParseBytes(raw)
	code, msg := r.Get("code"), r.Get("message")
	if code.Type == gjson.Number && code.Raw == strconv.FormatInt(code.Int(), 10) && msg.Type == gjson.String {
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			return b.Bytes()
		}
	}
	return translate.Errorf(translate.CodeInternalError, "the agent answered with an error: %.300s", raw).JSON()
}

// envOf returns env when the frame was read as a JSON-RPC message, else nil.
func envOf(env *translate.Envelope, err *translate.Error) *translate.Envelope {
	if err != nil || env.Frame == nil {
		return nil
	}
	return env
}

// envGet is get(frame, path), answered from env (which may be nil) for the
// fields the envelope pass already read: the method and, when they are
// plain strings, params.sessionId and params.update.sessionUpdate. A key
// repeated in the frame reads as its last value there, as the engine routes
// such a frame (gjson reads the first).
func envGet(env *translate.Envelope, frame []byte, path string) gjson.Result {
	if env != nil {
		var v string
		switch path {
		case "method":
			v = env.Method
		case "params.sessionId":
			v = env.SessionID
		case "params.update.sessionUpdate":
			v = env.UpdateKind
		}
		if v != "" && plainASCII(v) {
			// No Raw: the rules compare strings by their value.
			return gjson.Result{Type: gjson.String, Str: v}
		}
	}
	return get(frame, path)
}

// plainASCII reports whether s needs no escaping in a JSON string.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

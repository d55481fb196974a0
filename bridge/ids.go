package bridge

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// idKey is the canonical form of a raw JSON-RPC id, used only as a map key;
// the raw bytes are what go back on the wire. 1 and "1" differ (JSON-RPC
// ids are opaque); integers compare by value so an editor echoing 7 as 7.0 still
// matches, while ids too large for int64 compare by their digits.
func idKey(raw json.RawMessage) string {
	if plainInteger(raw) {
		return "n:" + string(raw) // what parsedIDKey gives, without parsing
	}
	return parsedIDKey(raw)
}

// parsedIDKey is idKey the long way, for any id.
func parsedIDKey(raw json.RawMessage) string {
	r := gjson.ParseBytes(raw)
	switch r.Type {
	case gjson.String:
		return "s:" + r.Str
	case gjson.Number:
		if i, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
			return "n:" + strconv.FormatInt(i, 10)
		}
		if f, err := strconv.ParseFloat(r.Raw, 64); err == nil && f == float64(int64(f)) && f < 1<<53 && f > -(1<<53) {
			return "n:" + strconv.FormatInt(int64(f), 10)
		}
		return "n:" + r.Raw
	case gjson.Null:
		return "null"
	}
	return "raw:" + string(raw)
}

// idAtEnd recovers the id of a message from its last bytes when the id is
// its last member (`…,"id":43}`): what a too-long line's answer needs when
// the id followed the payload. It insists on exactly one closing brace after
// the id, so that an "id" inside a nested object is not taken for it.
func idAtEnd(tail []byte) (json.RawMessage, bool) {
	t := bytes.TrimRight(tail, " \t\r\n")
	if len(t) == 0 || t[len(t)-1] != '}' {
		return nil, false
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t\r\n")
	k := bytes.LastIndex(t, []byte(`"id"`))
	if k < 0 {
		return nil, false
	}
	rest := bytes.TrimLeft(t[k+len(`"id"`):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return nil, false
	}
	v := bytes.TrimLeft(rest[1:], " \t\r\n")
	if translate.Valid(v) != nil {
		return nil, false
	}
	switch r := gjson.ParseBytes(v); r.Type {
	case gjson.Number, gjson.String:
		return json.RawMessage(bytes.Clone(v)), true
	}
	return nil, false
}

// plainInteger reports whether raw is a non-negative integer of at most 18
// digits, written without a leading zero or anything else: the form of
// almost every id, whose canonical form (see idKey) is itself.
func plainInteger(raw []byte) bool {
	if len(raw) == 0 || len(raw) > 18 || raw[0] == '0' && len(raw) > 1 {
		return false
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// sessionIDName is the member paramsSession looks for.
var sessionIDName = []byte(`"sessionId"`)

// paramsSession returns params.sessionId as gjson reads it, "" when there
// is none. Most requests that have none (extension methods, initialize)
// are answered without parsing: a member of that name is written either
// as is or with an escape.
func paramsSession(params json.RawMessage) string {
	if !bytes.Contains(params, sessionIDName) && bytes.IndexByte(params, '\\') < 0 {
		return ""
	}
	return gjson.GetBytes(params, "sessionId").Str
}

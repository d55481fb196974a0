package bridge

import (
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"
)

// idKey is the canonical form of a raw JSON-RPC id, used only as a map key;
// the raw bytes are what go back on the wire. 1 and "1" differ (acp-spec.md
// §20.6); integers compare by value so an editor echoing 7 as 7.0 still
// matches, while ids too large for int64 compare by their digits.
func idKey(raw json.RawMessage) string {
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

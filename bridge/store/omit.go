// Bounds on what is stored: binary payloads longer than MaxInline are
// replaced by Omitted and their length.

package store

import (
	"bytes"
	"strconv"
)

// Omitted is the prefix of the string that replaces an omitted payload:
// "acp-bridge:omitted:N" for N bytes (never valid base64, so never data).
const Omitted = "acp-bridge:omitted:"

// omitLarge replaces "data" and "blob" string values longer than max in
// body by Omitted and their length, splicing bytes: one pass, no decoding,
// since body may be a 40 MiB prompt and this runs on the caller's goroutine
// (copying only what is kept). body is valid JSON.
func omitLarge(body []byte, max int) []byte {
	type span struct{ from, to int }
	var spans []span
	keyEnd, key := -1, ""
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		start := i
		for i++; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' {
				i++
			}
		}
		end := i + 1 // past the closing quote
		j := end
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j < len(body) && body[j] == ':' {
			keyEnd, key = j+1, string(body[start+1:end-1])
			continue
		}
		if end-start-2 > max && (key == "data" || key == "blob") && len(bytes.TrimSpace(body[keyEnd:start])) == 0 {
			spans = append(spans, span{start, end})
		}
		key = ""
	}
	if len(spans) == 0 {
		return body
	}
	out := make([]byte, 0, 1024)
	last := 0
	for _, sp := range spans {
		out = append(out, body[last:sp.from]...)
		out = append(out, '"')
		out = append(out, Omitted...)
		out = strconv.AppendInt(out, int64(sp.to-sp.from-2), 10)
		out = append(out, '"')
		last = sp.to
	}
	return append(out, body[last:]...)
}

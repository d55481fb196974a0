package wire

import (
	"unicode/utf8"
	"unsafe"
)

// AppendString appends s to dst as a JSON string, quotes included, and
// returns the extended slice. It writes exactly what encoding/json writes
// for s with HTML escaping off (json.Encoder.SetEscapeHTML(false)):
//
//   - the quote and the backslash as \" and \\;
//   - \b, \f, \n, \r and \t as those escapes, every other byte below 0x20
//     as \u00XX (lower-case hex);
//   - U+2028 and U+2029 as \u2028 and \u2029: JSON allows them raw, but
//     JavaScript reads them as line breaks;
//   - each byte that is not part of valid UTF-8 as \ufffd, so the string
//     decodes to s with every such byte replaced by U+FFFD;
//   - everything else as it is, <, > and & included.
//
// HTML escaping is off because nothing the module writes with it is read
// as HTML: it goes to editors, agents and files, where \u003c for < only
// costs bytes and makes a frame differ from what its sender wrote. A page
// that embeds JSON in a script block uses encoding/json, which escapes for
// HTML.
func AppendString(dst []byte, s string) []byte {
	// plainPrefix only reads, so it may look at s's bytes in place.
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	dst = append(dst, '"')
	start := 0
	for i := 0; ; {
		if i += plainPrefix(b[i:]); i >= len(b) {
			break
		}
		if c := b[i]; c < utf8.RuneSelf {
			// The quote, the backslash or a control character.
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hex = "0123456789abcdef"

// appendEscape appends the escape of c, the quote, the backslash or a
// control character.
func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

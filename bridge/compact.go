package bridge

// compactInPlace removes the white space between the tokens of b, which must
// be valid JSON, by moving bytes down within b, and returns the shortened
// slice. Strings are copied as they are, escapes included.
func compactInPlace(b []byte) []byte {
	w := 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '"':
			inString = true
		}
		b[w] = c
		w++
	}
	return b[:w]
}

package rules

import (
	"bytes"
	"strings"
)

// rawLookup finds the value at a plain path (keys joined by dots) in doc and
// returns its raw bytes, sharing doc's memory. It does what gjson.Get does
// for such a path, including looking past a first duplicate key that leads
// nowhere, without decoding the value: templates copy values as raw JSON,
// and gjson unescapes every string it finds. handled is false when the path
// or the document takes it where it does not go (an array, an escaped key,
// bytes that are not JSON): the caller asks gjson then.
func rawLookup(doc []byte, path string) (raw []byte, found, handled bool) {
	if !plainPath(path) {
		return nil, false, false
	}
	return lookupIn(trimWS(doc), path)
}

func lookupIn(v []byte, path string) (raw []byte, found, handled bool) {
	if len(v) == 0 {
		return nil, false, false
	}
	if v[0] != '{' {
		if v[0] == '[' || v[0] == '"' {
			// Indexes and queries are gjson's; so is a path into a
			// string, which gjson reads leniently ("[[)A" has a 0th
			// element "[)" for it), and its meaning is kept.
			return nil, false, false
		}
		return nil, false, true // a number, true, false or null has no keys
	}
	seg, rest, last := path, "", true
	if dot := strings.IndexByte(path, '.'); dot >= 0 {
		seg, rest, last = path[:dot], path[dot+1:], false
	}
	i := 1
	for {
		i = skipWS(v, i)
		if i >= len(v) {
			return nil, false, false
		}
		if v[i] == '}' {
			return nil, false, true
		}
		if v[i] == ',' {
			i = skipWS(v, i+1)
		}
		if i >= len(v) || v[i] != '"' {
			return nil, false, false
		}
		end := bytes.IndexByte(v[i+1:], '"')
		if end < 0 {
			return nil, false, false
		}
		key := v[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, false, false
		}
		i = skipWS(v, i+2+end)
		if i >= len(v) || v[i] != ':' {
			return nil, false, false
		}
		start := skipWS(v, i+1)
		match := string(key) == seg
		if match && !last {
			// Descend without finding the value's end first: lookupIn
			// stops at the end of the object it searches.
			raw, found, handled := lookupIn(v[start:], rest)
			if !handled || found {
				return raw, found, handled
			}
		}
		stop := skipValue(v, start)
		if stop < 0 {
			return nil, false, false
		}
		if match && last {
			return v[start:stop], true, true
		}
		i = stop
	}
}

// skipValue returns the index just past the JSON value starting at i, or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k := skipValue(b, j)
				if k < 0 {
					return -1
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
scan:
	for ; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			break scan
		}
	}
	if j == i {
		return -1
	}
	return j
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func trimWS(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// plainPath reports whether path is only keys joined by dots: no escapes,
// wildcards, queries, modifiers or pipes, and no empty key.
func plainPath(path string) bool {
	if path == "" || path[0] == '.' || path[len(path)-1] == '.' {
		return false
	}
	for i := 0; i < len(path); i++ {
		switch path[i] {
		case '\\', '*', '?', '#', '@', '|', '!', '=', '<', '>', '%', '[', ']', '{', '}', '"':
			return false
		case '.':
			if path[i-1] == '.' {
				return false
			}
		}
	}
	return true
}

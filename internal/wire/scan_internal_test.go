package wire

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

var benchUpdate = []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}}}`)

func BenchmarkParseEnvelopeUpdate(b *testing.B) {
	b.SetBytes(int64(len(benchUpdate)))
	for b.Loop() {
		if _, err := ParseEnvelope(benchUpdate); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidUpdate(b *testing.B) {
	b.SetBytes(int64(len(benchUpdate)))
	for b.Loop() {
		if err := valid(benchUpdate); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpecial8 checks the word-at-a-time string scan against the byte
// table it replaces: for every byte value at every position of a word of
// plain bytes (and after a special byte, where borrows could mislead), the
// lowest flag is exactly the first byte that needs a closer look.
func TestSpecial8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', 0x01, '"'} {
				var w [8]byte
				for i := range w {
					w[i] = 'a'
				}
				w[pos] = byte(c)
				if pos+1 < 8 {
					w[pos+1] = fill // what follows must not move the lowest flag
				}
				want := 8
				for i, b := range w {
					if !plain[b] {
						want = i
						break
					}
				}
				m := special8(binary.LittleEndian.Uint64(w[:]))
				got := 8
				if m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("special8(%q): first special byte at %d, want %d", w, got, want)
				}
			}
		}
	}
}

// TestValidLongStrings puts every kind of byte a string scan stops at
// (quote, escape, control character, multi-byte and broken UTF-8) at every
// offset of a long string, where the word-at-a-time loop meets it.
func TestValidLongStrings(t *testing.T) {
	for _, special := range []string{`\"`, `\\`, `\n`, `\u00e9`, "\x01", "\x1f", "é", "😀", "\xff", "\xe2\x82", `\x`} {
		for off := range 20 {
			for tail := range 10 {
				s := `{"k":"` + strings.Repeat("a", off) + special + strings.Repeat("b", tail) + `"}`
				got := valid([]byte(s)) == nil
				want := json.Valid([]byte(s)) && utf8.ValidString(s)
				if got != want {
					t.Errorf("valid(%q) = %v, want %v", s, got, want)
				}
			}
		}
	}
}

// scanStringBytewise is scanString one byte at a time, with neither its
// vectorised first look nor its word-at-a-time loop: the reference they
// must agree with.
func scanStringBytewise(b []byte, i int) (end int, escaped bool, why string) {
	i++
	for {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			return i, escaped, "unterminated string"
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, ""
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, "unterminated string"
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, escaped, `bad \u escape`
				}
				i += 6
			default:
				return i, escaped, "bad escape"
			}
		case c < 0x20:
			return i, escaped, "control character in a string"
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, escaped, "not valid UTF-8"
			}
			i += size
		}
	}
}

// TestScanStringAgreesBytewise builds strings of plain runs and every kind
// of byte the scan stops at, in random places and lengths, and checks that
// scanString ends, fails and reports escapes exactly where the byte-wise
// reference does.
func TestScanStringAgreesBytewise(t *testing.T) {
	pieces := []string{`"`, `\"`, `\\`, `\n`, `\u00e9`, `\u12`, `\x`, "\x01", "\x1f", "\x7f", "é", "😀", "\xff", "\xe2\x82", " ", "}", `\`}
	r := rand.New(rand.NewPCG(7, 7))
	for range 200000 {
		var sb strings.Builder
		sb.WriteByte('"')
		for range r.IntN(6) {
			sb.WriteString(strings.Repeat("a", r.IntN(20)))
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		sb.WriteString(strings.Repeat("b", r.IntN(12)))
		if r.IntN(4) != 0 {
			sb.WriteString(`"`)
		}
		sb.WriteString(strings.Repeat(`,"x":1}`, r.IntN(2)))
		b := []byte(sb.String())
		e1, x1, w1 := scanString(b, 0)
		e2, x2, w2 := scanStringBytewise(b, 0)
		if e1 != e2 || w1 != w2 || x1 != x2 {
			t.Fatalf("scanString(%q) = %d %v %q, byte-wise %d %v %q", b, e1, x1, w1, e2, x2, w2)
		}
	}
}

// The members a message's own names map to, by initial and by name, are
// the six JSON-RPC names and nothing else: memberByInitial needs each to
// start with a letter of its own.
func TestMemberNames(t *testing.T) {
	seen := map[byte]bool{}
	for m, name := range memberNames {
		if member(m) == otherMember {
			continue
		}
		if seen[name[0]] {
			t.Errorf("two member names start with %q", name[0])
		}
		seen[name[0]] = true
		if got := memberOf(name); got != member(m) {
			t.Errorf("memberOf(%q) = %d, want %d", name, got, m)
		}
	}
	for _, name := range []string{"", "i", "ids", "jsonrpc2", "Method", "err", "x"} {
		if got := memberOf(name); got != otherMember {
			t.Errorf("memberOf(%q) = %d, want none", name, got)
		}
	}
}

// FuzzPlainPrefix: the machine's plainPrefix and the portable one agree
// with the definition, byte by byte, wherever the slice starts and ends.
func FuzzPlainPrefix(f *testing.F) {
	f.Add([]byte(`abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZab"}}}}`), 0)
	f.Add([]byte("0123456789abcdef0123456789abcde\x7f\x80 \\ \" \x1f"), 3)
	f.Add([]byte("\xff"), 0)
	f.Add([]byte("~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~ !#[]"), 1)
	f.Fuzz(func(t *testing.T, b []byte, off int) {
		if off < 0 || off > len(b) {
			off = 0
		}
		b = b[off:]
		want := 0
		for want < len(b) && b[want] >= 0x20 && b[want] < 0x80 && b[want] != '"' && b[want] != '\\' {
			want++
		}
		if got := plainPrefix(b); got != want {
			t.Fatalf("plainPrefix(%q) = %d, want %d", b, got, want)
		}
		if got := plainPrefixSWAR(b); got != want {
			t.Fatalf("plainPrefixSWAR(%q) = %d, want %d", b, got, want)
		}
	})
}

package translate

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
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

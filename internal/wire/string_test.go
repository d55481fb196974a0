package wire_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/internal/wire"
)

// encodingJSON is what AppendString must write: encoding/json's encoding
// of s with HTML escaping off, without the Encoder's newline.
func encodingJSON(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var appendStringSeeds = []string{
	"",
	"plain ASCII, long enough for sixteen bytes at a time",
	`"\`,
	"\x00\x01\x07\b\t\n\v\f\r\x0e\x1f\x7f",
	"line\r\nbreaks\rand\nmore",
	"<script>&amp;</script>",
	"é 😀 \u2027\u2028\u2029\u202a",
	"\xff",
	"a\xff\xfeb",
	"\xed\xa0\x80", // a surrogate written as UTF-8: three bad bytes
	"\xe2\x80",     // U+2028 cut short
	"\xf0\x9f\x98", // an emoji cut short
	strings.Repeat("0123456789abcdef", 5) + "\"" + strings.Repeat("x", 17) + "\u2028",
}

func TestAppendString(t *testing.T) {
	for _, s := range appendStringSeeds {
		if got, want := wire.AppendString(nil, s), encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	// It appends: what dst held stays.
	if got := string(wire.AppendString([]byte("x:"), "y")); got != `x:"y"` {
		t.Errorf(`AppendString("x:", "y") = %s`, got)
	}
	// The escapes the module relies on, spelled out.
	for s, want := range map[string]string{
		"\r":       `"\r"`,
		"\x1f":     `"\u001f"`,
		"<>&":      `"<>&"`,
		"\u2028":   `"\u2028"`,
		"a\xffb":   `"a\ufffdb"`,
		"\xff\xfe": `"\ufffd\ufffd"`,
	} {
		if got := string(wire.AppendString(nil, s)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

// FuzzAppendString holds AppendString to its documented rule: its output
// is byte for byte encoding/json's (HTML escaping off), and decodes with
// encoding/json to s itself when s is valid UTF-8, else to s with each
// byte that is not part of valid UTF-8 replaced by U+FFFD.
func FuzzAppendString(f *testing.F) {
	for _, s := range appendStringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := wire.AppendString([]byte("prefix"), s)
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("AppendString lost what dst held: %q", got)
		}
		got = got[len("prefix"):]
		if want := encodingJSON(t, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s, which does not decode: %v", s, got, err)
		}
		if want := replaceInvalid(s); back != want {
			t.Fatalf("AppendString(%q) decodes to %q, want %q", s, back, want)
		}
		if bytes.ContainsAny(got, "\r\n\u2028\u2029") {
			t.Fatalf("AppendString(%q) = %q holds a line break", s, got)
		}
	})
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD (strings.ToValidUTF8 replaces a run of them with one).
func replaceInvalid(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

func BenchmarkAppendString(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"method", "session/update"},
		{"text", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)},
		{"escapes", strings.Repeat("line\n\"quoted\"\ttab é ", 20)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 4*len(bc.s))
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				buf = wire.AppendString(buf[:0], bc.s)
			}
		})
	}
}

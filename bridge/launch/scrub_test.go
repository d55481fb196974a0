package launch

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Every encoding a secret travels in is scrubbed: the forms the issue
// found leaking (a query token URL-encoded with "+" and "%2B" in a 401 body,
// a header token JSON-escaped with "\/") and the others named in the
// Scrubber's documentation.
func TestScrubber_Encodings(t *testing.T) {
	const tok = "a+b/c d&é<1>"
	sc := NewScrubber(tok)
	forms := map[string]string{
		"raw":                tok,
		"query escape":       url.QueryEscape(tok),
		"query lower hex":    strings.ToLower(url.QueryEscape(tok)),
		"path escape":        url.PathEscape(tok),
		"json":               jsonInner(tok, false),
		"json html":          jsonInner(tok, true),
		"json \\/":           `a+b\/c d&é<1>`,
		"json ascii upper":   `a+b/c d\u0026\u00E9\u003C1\u003E`,
		"json ascii lower":   `a\u002bb\u002fc\u0020d&\u00e9<1>`,
		"go quote":           strconv.QuoteToASCII(tok)[1 : len(strconv.QuoteToASCII(tok))-1],
		"query in json":      jsonInner(url.QueryEscape(tok), true),
		"json in json":       jsonInner(jsonInner(`"`+tok+`"`, true), true),
		"query, json, json":  jsonInner(jsonInner(url.QueryEscape(tok), false), true),
		"json in a log line": strconv.Quote(jsonInner(tok, false)),
	}
	for name, form := range forms {
		in := "GET /acp?token=" + form + " HTTP/1.1"
		got := sc.Scrub(in)
		if strings.Contains(got, form) || !strings.Contains(got, "<redacted>") {
			t.Errorf("%s: Scrub(%q) = %q", name, in, got)
		}
	}
	// hclog's text format escapes the quotes of a JSON frame it logs but
	// not their backslashes: {"auth":"k\"q"} is logged {\"auth\":\"k\\"q\"}.
	const quoted = `k/"q\1`
	frame := `frame="` + strings.ReplaceAll(`{"auth":`+jsonString(quoted)+`}`, `"`, `\"`) + `"`
	if got := NewScrubber(quoted).Scrub(frame); strings.Contains(got, "q") || !strings.Contains(got, "<redacted>") {
		t.Errorf("hclog text: Scrub(%s) = %s", frame, got)
	}
	// The token inside JSON after escaping: the 401 body of the issue.
	body, _ := json.Marshal(map[string]string{"error": "401 for /acp?token=" + url.QueryEscape(tok)})
	if got := sc.Scrub(string(body)); strings.Contains(got, "token=a") || !json.Valid([]byte(got)) {
		t.Errorf("JSON body scrubbed to %s", got)
	}
	// Basic auth: the header carries base64 of user:pass.
	basic := base64.StdEncoding.EncodeToString([]byte("bob:p@ss w+rd"))
	if got := NewScrubber("Basic " + basic).Scrub("Authorization: Basic " + basic); strings.Contains(got, basic) {
		t.Errorf("basic auth: %s", got)
	}
	// What holds no secret is left alone, byte for byte.
	for _, s := range []string{"", "a+b/c d&é<1", "a+b/c d&e<1>", `a%2Bb%2Fc+d%26%C3%A9%3C1%3F`, "plain text"} {
		if got := sc.Scrub(s); got != s {
			t.Errorf("Scrub(%q) = %q, want it unchanged", s, got)
		}
	}
	if b := []byte("no secret here"); &sc.ScrubBytes(b)[0] != &b[0] {
		t.Errorf("ScrubBytes copied a text without secrets")
	}
}

// A secret made only of characters that have escapes (no anchor) is found
// too, and one next to another is replaced whole.
func TestScrubber_NoAnchor(t *testing.T) {
	sc := NewScrubber(`!@#$%^&*()"\/`)
	for _, in := range []string{`x!@#$%^&*()"\/y`, `x` + url.QueryEscape(`!@#$%^&*()"\/`) + `y`, `x` + jsonInner(`!@#$%^&*()"\/`, true) + `y`} {
		if got := sc.Scrub(in); got != "x<redacted>y" {
			t.Errorf("Scrub(%q) = %q", in, got)
		}
	}
}

// fuzzEncoders are the encodings the Scrubber promises to see through, as
// independent code writes them: the first of up to three nested may use
// lower-case hex, the outer ones are what encoding/json, strconv.Quote and
// net/url write.
var fuzzEncoders = []struct {
	name  string
	first bool // lower-case hex and lax escapes: only the innermost
	utf8  bool // needs valid UTF-8 (JSON replaces invalid bytes)
	enc   func(string) string
}{
	{"raw", false, false, func(s string) string { return s }},
	{"json", false, true, func(s string) string { return jsonInner(s, false) }},
	{"json html", false, true, func(s string) string { return jsonInner(s, true) }},
	{"json slash", false, true, func(s string) string { return strings.ReplaceAll(jsonInner(s, false), "/", `\/`) }},
	{"go quote", false, false, func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }},
	{"go quote ascii", false, false, func(s string) string { q := strconv.QuoteToASCII(s); return q[1 : len(q)-1] }},
	{"query", false, false, url.QueryEscape},
	{"path", false, false, url.PathEscape},
	{"query lower", true, false, func(s string) string { return lowerHex(url.QueryEscape(s)) }},
	{"json ascii", true, true, func(s string) string { return jsonASCII(s, "%04x") }},
	{"json ASCII", true, true, func(s string) string { return jsonASCII(s, "%04X") }},
}

// jsonASCII escapes every character but letters and digits as \uXXXX.
func jsonASCII(s string, format string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && invariant(string(r)) {
			b.WriteRune(r)
			continue
		}
		if r > 0xFFFF {
			hi, lo := surrogates(r)
			fmt.Fprintf(&b, `\u`+format+`\u`+format, hi, lo)
			continue
		}
		fmt.Fprintf(&b, `\u`+format, r)
	}
	return b.String()
}

// FuzzScrub: a secret of any characters, encoded in up to three nested
// encodings and embedded in any text, is never present afterwards, raw or
// encoded; a text that cannot hold the secret is left unchanged.
func FuzzScrub(f *testing.F) {
	f.Add("a+b/c d", "GET /?token=", " HTTP/1.1", uint16(6))
	f.Add(`"\/<>&%+`, `{"x":"`, `"}`, uint16(0x123))
	f.Add("tok-é😀\x00\t\n", "", "", uint16(0x321))
	f.Add("Basic Ym9iOnB3", "Authorization: ", "\n", uint16(7))
	f.Fuzz(func(t *testing.T, secret, before, after string, choice uint16) {
		secret = strings.TrimSpace(secret)
		if len(secret) < minSecret || len(secret) > 64 {
			return
		}
		sc := NewScrubber(secret)
		enc := secret
		for layer := range 3 {
			e := fuzzEncoders[int(choice>>(layer*4)&0xF)%len(fuzzEncoders)]
			if e.first && layer > 0 || e.utf8 && !utf8.ValidString(enc) {
				continue
			}
			enc = e.enc(enc)
		}
		got := sc.Scrub(before + enc + after)
		clean := strings.ReplaceAll(got, "<redacted>", absentByte(secret, enc))
		if strings.Contains(clean, secret) || strings.Contains(clean, enc) {
			t.Fatalf("secret %q as %q survives in %q", secret, enc, got)
		}
		// Without one of the secret's bytes (and the escapes' own
		// characters, when that byte has escapes) no form of it is
		// possible: the text must come out as it went in.
		x := secret[int(choice)%len(secret)]
		if x >= utf8.RuneSelf || !utf8.ValidString(before+after) {
			return
		}
		drop := string(x)
		if !invariant(drop) {
			drop += `\%+`
		}
		plain := strings.Map(func(r rune) rune {
			if r < utf8.RuneSelf && strings.ContainsRune(drop, r) {
				return -1
			}
			return r
		}, before+after)
		if got := sc.Scrub(plain); got != plain {
			t.Fatalf("Scrub(%q) = %q with no secret in it", plain, got)
		}
	})
}

// absentByte returns a byte that occurs in none of texts. The fuzz targets
// put it where a replacement was, so that a secret found afterwards is one
// the Scrubber left: a mark that is itself one of the secret's bytes can
// join the text around it into the secret ("\x01" + "\x00\x00\x00").
func absentByte(texts ...string) string {
	for b := range 256 {
		if !slices.ContainsFunc(texts, func(s string) bool { return strings.IndexByte(s, byte(b)) >= 0 }) {
			return string([]byte{byte(b)})
		}
	}
	panic("every byte occurs in the texts")
}

// ScrubJSON keeps JSON valid: a secret that is also a literal or a piece
// of structure is only replaced inside strings, never in an escape's middle.
func TestScrubber_JSON(t *testing.T) {
	tests := []struct{ secret, in, want string }{
		{"true", `{"a":true,"t":"is true"}`, `{"a":true,"t":"is <redacted>"}`},
		{`x","y`, `{"k":"x","y":1,"s":"x\",\"y"}`, `{"k":"x","y":1,"s":"<redacted>"}`},
		{"nabc", `{"s":"\nabc nabc"}`, `{"s":"\nabc <redacted>"}`},
		{"u0041zz", `{"s":"\u0041zz u0041zz"}`, `{"s":"\u0041zz <redacted>"}`},
		{`abc\`, `{"s":"abc\"","t":"abc\\"}`, `{"s":"abc\"","t":"<redacted>"}`},
	}
	for _, tt := range tests {
		if got := string(NewScrubber(tt.secret).ScrubJSON([]byte(tt.in))); got != tt.want {
			t.Errorf("ScrubJSON(%q) with secret %q = %s, want %s", tt.in, tt.secret, got, tt.want)
		}
	}
}

// FuzzScrubJSON: a JSON message whose string holds a secret, in any of
// the encodings, comes out valid JSON without the secret in its string.
func FuzzScrubJSON(f *testing.F) {
	f.Add("true", "it is ", "", uint16(0))
	f.Add(`x","y`, `a\`, `"b`, uint16(0x12))
	f.Add(`abc\`, "", `"`, uint16(0x3))
	f.Fuzz(func(t *testing.T, secret, before, after string, choice uint16) {
		secret = strings.TrimSpace(secret)
		if len(secret) < minSecret || len(secret) > 64 || !utf8.ValidString(secret) || !utf8.ValidString(before) || !utf8.ValidString(after) {
			return
		}
		enc := secret
		for layer := range 2 {
			e := fuzzEncoders[int(choice>>(layer*4)&0xF)%len(fuzzEncoders)]
			if !e.first || layer == 0 {
				enc = e.enc(enc)
			}
		}
		doc, _ := json.Marshal(map[string]any{"n": true, "t": before + enc + after, "u": []string{secret}})
		got := NewScrubber(secret).ScrubJSON(doc)
		var v struct {
			T string
			U []string
		}
		if err := json.Unmarshal(got, &v); err != nil {
			t.Fatalf("ScrubJSON(%s) = %s: %v", doc, got, err)
		}
		mark := absentByte(secret, enc)
		for _, s := range append(v.U, v.T) {
			clean := strings.ReplaceAll(s, "<redacted>", mark)
			if strings.Contains(clean, secret) || strings.Contains(clean, enc) {
				t.Fatalf("secret %q as %q survives in %s", secret, enc, got)
			}
		}
	})
}

// The cost on the editor's path: a message without secrets is looked at
// once per secret and never copied.
func BenchmarkScrubJSON_NoSecret(b *testing.B) {
	sc := NewScrubber("Bearer tok-Zq9canary/abc", "tok-Zq9canary/abc", "p+q/Zq9 x&y=é")
	msg := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("lorem ipsum dolor sit amet ", 40) + `"}}}}`)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if out := sc.ScrubJSON(msg); len(out) != len(msg) {
			b.Fatal("changed")
		}
	}
}

package launch

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Scrubber replaces every configured secret value in a text with
// "<redacted>", in every form the value travels in. Secrets never go to a
// logger on purpose; the scrubber is for what the bridge quotes from
// elsewhere: an agent that echoes its Authorization header in a 401 body,
// a child that prints its token on stderr, an error that repeats a URL's
// query, an agent that echoes its token in a session/update.
//
// A secret is found raw and encoded, each of its characters independently,
// in any of these forms and up to three of them nested (a URL-encoded token
// inside a JSON string inside a JSON log line):
//
//   - JSON-escaped: \" \\ \/ \n …, and \uXXXX (surrogate pairs too) with
//     upper- or lower-case hex;
//   - URL-encoded: %XX with upper- or lower-case hex, "+" for a space
//     (query encoding) or "%20" (path encoding);
//   - Go-quoted (strconv.Quote, QuoteToASCII): \xXX, \a, \U0001F600 …;
//   - quoted as hclog's text format quotes a value: \" for a quote, a
//     backslash as it is.
//
// Letters, digits and "-._~" are taken raw only, since no encoder rewrites
// them; the longest run of them in a secret is what the scrubber looks for
// first, so that a text without secrets costs one bytes.Index per secret.
// Base64 of user:pass is a secret value of its own (see Agent.Secrets).
type Scrubber struct {
	patterns []*pattern // longest secret first
	values   []string
}

// redactedMark replaces every secret found.
const redactedMark = "<redacted>"

// minSecret is the shortest value scrubbed: shorter ones ("1", "yes") would
// blank out ordinary words and carry no credential worth the name.
const minSecret = 4

// NewScrubber returns a Scrubber for values.
func NewScrubber(values ...string) *Scrubber {
	sc := &Scrubber{}
	for _, v := range values {
		if v = strings.TrimSpace(v); len(v) >= minSecret && !slices.Contains(sc.values, v) {
			sc.values = append(sc.values, v)
		}
	}
	slices.SortFunc(sc.values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range sc.values {
		sc.patterns = append(sc.patterns, compile(v))
	}
	return sc
}

// Values returns the secret values scrubbed, longest first.
func (sc *Scrubber) Values() []string {
	if sc == nil {
		return nil
	}
	return sc.values
}

// Scrub returns s without secrets.
func (sc *Scrubber) Scrub(s string) string {
	if sc == nil || len(sc.patterns) == 0 {
		return s
	}
	b := []byte(s)
	if out := sc.ScrubBytes(b); !sameSlice(out, b) {
		return string(out)
	}
	return s
}

func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// ScrubBytes returns b without secrets: b itself when it holds none, else
// a new slice (b is never written to).
func (sc *Scrubber) ScrubBytes(b []byte) []byte {
	if sc == nil || len(b) == 0 {
		return b
	}
	for _, p := range sc.patterns {
		b = p.replace(b, false)
	}
	return b
}

// ScrubJSON is ScrubBytes for one JSON text, such as a message for the
// editor or a trace record: only what lies within a JSON string, and
// starts and ends between two of its characters (not inside an escape), is
// replaced, so that valid JSON stays valid. A secret such as "true" (a
// URL's query value) leaves the literal true alone.
func (sc *Scrubber) ScrubJSON(b []byte) []byte {
	if sc == nil || len(b) == 0 {
		return b
	}
	for _, p := range sc.patterns {
		b = p.replace(b, true)
	}
	return b
}

// Writer returns w with every write scrubbed. Loggers write a whole line per
// call, so a secret cannot be split between two writes.
func (sc *Scrubber) Writer(w io.Writer) io.Writer {
	if sc == nil || len(sc.patterns) == 0 {
		return w
	}
	return scrubWriter{w: w, scrub: sc.ScrubBytes}
}

// JSONWriter is Writer for a stream of JSON texts, one per write (a JSON
// log): each is scrubbed with ScrubJSON, so that it stays valid.
func (sc *Scrubber) JSONWriter(w io.Writer) io.Writer {
	if sc == nil || len(sc.patterns) == 0 {
		return w
	}
	return scrubWriter{w: w, scrub: sc.ScrubJSON}
}

type scrubWriter struct {
	w     io.Writer
	scrub func([]byte) []byte
}

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := s.w.Write(s.scrub(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// A pattern finds one secret in its every encoding.
type pattern struct {
	// forms[i] lists every form the secret's i-th character (a rune, or a
	// byte of invalid UTF-8) takes, the raw one first.
	forms [][]string
	// anchor is the longest run of characters that have no form but the
	// raw one, starting at character anchorAt; empty if there is none.
	anchor   []byte
	anchorAt int
	// rare is the index in anchor of its least common byte in ordinary
	// text: the search is for it (bytes.IndexByte), then the anchor.
	rare    int
	maxForm int
	// first marks the bytes a form of the first character starts with.
	first [256]bool
	// starts[i] marks the bytes a form of character i starts with: a
	// candidate is mostly ruled out by one look-up.
	starts []*[256]bool
}

func compile(secret string) *pattern {
	p := &pattern{}
	runStart, runLen := 0, 0
	for i := 0; i < len(secret); {
		r, n := utf8.DecodeRuneInString(secret[i:])
		c := secret[i : i+n]
		if r == utf8.RuneError && n == 1 {
			c = secret[i : i+1]
		}
		forms := charForms(c)
		for _, f := range forms {
			p.maxForm = max(p.maxForm, len(f))
		}
		if len(forms) == 1 {
			runLen++
			if runLen > countRunes(p.anchor) {
				p.anchorAt = len(p.forms) - runLen + 1
				p.anchor = []byte(secret[runStart : i+n])
			}
		} else {
			runLen, runStart = 0, i+n
		}
		p.forms = append(p.forms, forms)
		i += n
	}
	p.rare = rarest(p.anchor)
	for _, forms := range p.forms {
		t := new([256]bool)
		for _, f := range forms {
			t[f[0]] = true
		}
		p.starts = append(p.starts, t)
	}
	p.first = *p.starts[0]
	return p
}

func countRunes(b []byte) int { return utf8.RuneCount(b) }

// invariant reports whether no encoder rewrites c: letters, digits, "-._~".
func invariant(c string) bool {
	if len(c) != 1 {
		return false
	}
	b := c[0]
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// charForms returns every form of the character c, raw first: its own
// escapes (any hex case), then up to two more escapings of each.
func charForms(c string) []string {
	if invariant(c) {
		return []string{c}
	}
	forms := []string{c}
	add := func(f string) {
		if f != "" && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, f := range ownEscapes(c) {
		add(f)
	}
	level := slices.Clone(forms)
	for range 2 {
		var next []string
		for _, f := range level {
			for _, esc := range escapers {
				if e := esc(f); !slices.Contains(forms, e) {
					add(e)
					next = append(next, e)
				}
			}
		}
		level = next
	}
	return forms
}

// ownEscapes lists the ways one encoding can write c: JSON's short and
// \uXXXX escapes, URL percent-escapes and "+", Go's quoting.
func ownEscapes(c string) []string {
	var out []string
	r, size := utf8.DecodeRuneInString(c)
	valid := !(r == utf8.RuneError && size == 1)
	if valid {
		switch r {
		case '"':
			out = append(out, `\"`)
		case '\\':
			out = append(out, `\\`)
		case '/':
			out = append(out, `\/`)
		case '\b':
			out = append(out, `\b`)
		case '\f':
			out = append(out, `\f`)
		case '\n':
			out = append(out, `\n`)
		case '\r':
			out = append(out, `\r`)
		case '\t':
			out = append(out, `\t`)
		case ' ':
			out = append(out, "+")
		}
		var lower, upper string
		if r > 0xFFFF {
			hi, lo := surrogates(r)
			lower = fmt.Sprintf(`\u%04x\u%04x`, hi, lo)
			upper = fmt.Sprintf(`\u%04X\u%04X`, hi, lo)
		} else {
			lower = fmt.Sprintf(`\u%04x`, r)
			upper = fmt.Sprintf(`\u%04X`, r)
		}
		out = append(out, lower, upper)
	}
	var lower, upper strings.Builder
	for i := 0; i < len(c); i++ {
		fmt.Fprintf(&lower, "%%%02x", c[i])
		fmt.Fprintf(&upper, "%%%02X", c[i])
	}
	out = append(out, lower.String(), upper.String())
	for _, q := range []string{strconv.Quote(c), strconv.QuoteToASCII(c)} {
		if q = q[1 : len(q)-1]; q != c {
			out = append(out, q)
		}
	}
	return out
}

func surrogates(r rune) (hi, lo rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// escapers are how a text already carrying an encoded secret is encoded
// again: into a JSON string (as encoding/json writes one, with and without
// its HTML escapes, and with "/" escaped as PHP does), a Go-quoted log
// value, a value of hclog's text format (which escapes quotes but writes a
// backslash as it is: a JSON frame's \" becomes \\"), a URL query or path.
var escapers = []func(string) string{
	func(s string) string { return jsonInner(s, false) },
	func(s string) string { return jsonInner(s, true) },
	func(s string) string { return strings.ReplaceAll(jsonInner(s, false), "/", `\/`) },
	func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] },
	func(s string) string { q := strconv.QuoteToASCII(s); return q[1 : len(q)-1] },
	func(s string) string { return strings.ReplaceAll(s, `"`, `\"`) },
	url.QueryEscape,
	url.PathEscape,
}

// jsonInner is s as the inside of a JSON string.
func jsonInner(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s) // a string always encodes
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}

// replace returns b with every occurrence of the secret replaced, b itself
// when there is none. With inJSON, only occurrences inside JSON strings.
func (p *pattern) replace(b []byte, inJSON bool) []byte {
	var js jsonSpans
	var out []byte
	last, from := 0, 0
	var buf [2][]int
	for {
		start, ends := p.find(b, from, &buf)
		if start < 0 {
			break
		}
		// The longest reading, or with js the longest that ends between
		// two characters of the string it starts in.
		slices.Sort(ends)
		end := -1
		for i := len(ends) - 1; i >= 0 && end < 0; i-- {
			if !inJSON || js.within(b, start, ends[i]) {
				end = ends[i]
			}
		}
		if end < 0 {
			from = start + 1
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b))
		}
		out = append(out, b[last:start]...)
		out = append(out, redactedMark...)
		last, from = end, end
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// find returns the first start of the secret at or after from, with
// every end it may have there, or -1.
func (p *pattern) find(b []byte, from int, buf *[2][]int) (start int, ends []int) {
	if len(p.anchor) == 0 {
		for s := from; s < len(b); s++ {
			if p.first[b[s]] {
				if ends := p.matchAt(b, s, buf); ends != nil {
					return s, ends
				}
			}
		}
		return -1, nil
	}
	for at := from + p.rare; at < len(b); {
		i := bytes.IndexByte(b[at:], p.anchor[p.rare])
		if i < 0 {
			return -1, nil
		}
		pos := at + i - p.rare
		if !bytes.HasPrefix(b[pos:], p.anchor) {
			at += i + 1
			continue
		}
		for s := max(from, pos-p.anchorAt*p.maxForm); s <= pos; s++ {
			if p.first[b[s]] {
				if ends := p.matchAt(b, s, buf); ends != nil {
					return s, ends
				}
			}
		}
		at = pos + p.rare + 1
	}
	return -1, nil
}

// byFrequency orders lower-case letters from the most common in English
// text; any other byte a secret's anchor holds (digits, capitals, "-._~")
// is taken as rarer than all of them.
const byFrequency = "etaoinsrhldcumfpgwybvkxjqz"

// rarest returns the index of the least common byte of anchor.
func rarest(anchor []byte) int {
	best, bestScore := 0, -1
	for i, c := range anchor {
		score := strings.IndexByte(byFrequency, c) // rarer letters rank later
		if score < 0 {
			score = len(byFrequency) // not a lower-case letter: rarer still
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// matchAt returns every end of the secret that starts at b[s], or nil. It
// follows every reading of the text at once: a "\\" may be one escaped
// backslash or the start of a longer escape.
func (p *pattern) matchAt(b []byte, s int, buf *[2][]int) []int {
	cur := append(buf[0][:0], s)
	next := buf[1][:0]
	for i, forms := range p.forms {
		next = next[:0]
		for _, q := range cur {
			if q >= len(b) || !p.starts[i][b[q]] {
				continue
			}
			for _, f := range forms {
				if len(b)-q >= len(f) && string(b[q:q+len(f)]) == f && !slices.Contains(next, q+len(f)) {
					next = append(next, q+len(f))
				}
			}
		}
		if len(next) == 0 {
			buf[0], buf[1] = cur, next
			return nil
		}
		cur, next = next, cur
	}
	buf[0], buf[1] = cur, next
	return cur
}

// secretValues returns the values the StreamScrubber looks for, longest
// first: each value raw, JSON-escaped (with "/" escaped too), Go-quoted and
// URL-encoded (query and path, either hex case). It cannot look for every
// mix of encodings as the Scrubber does: it holds back a write's end while
// that end could begin a value, which needs the values spelled out.
func secretValues(values []string) []string {
	var vs []string
	for _, v := range values {
		if v = strings.TrimSpace(v); len(v) >= minSecret {
			vs = append(vs, v)
			j := jsonString(v)
			for _, quoted := range []string{j, strings.ReplaceAll(j, "/", `\/`), strconv.Quote(v)} {
				if q := quoted[1 : len(quoted)-1]; q != v {
					vs = append(vs, q)
				}
			}
			for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
				if e != v {
					vs = append(vs, e, lowerHex(e))
				}
			}
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(vs)
}

// Secrets lists the secret values of the agent: its handshake header values
// (and the token after a scheme such as "Bearer", and for "Basic" the
// credentials it encodes), the values of the
// environment it is given, and the user info and query values of its URL
// (with the Basic credentials the WebSocket dial makes of them), and the
// values its dialect reads from the environment (a rule profile's env()).
func (spec Agent) Secrets() []string {
	var out []string
	if d, ok := lookupDialect(spec.Dialect); ok && d.Secrets != nil {
		out = append(out, d.Secrets()...)
	}
	if ws := spec.WebSocket; ws != nil {
		for _, vs := range ws.Header {
			for _, v := range vs {
				out = append(out, v)
				scheme, token, ok := strings.Cut(v, " ")
				if !ok {
					continue
				}
				out = append(out, token)
				// Basic credentials travel decoded too: user:pass, and
				// the password alone.
				if strings.EqualFold(scheme, "Basic") {
					if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token)); err == nil {
						_, pass, _ := strings.Cut(string(b), ":")
						out = append(out, string(b), pass)
					}
				}
			}
		}
		if u, err := url.Parse(ws.URL); err == nil {
			if u.User != nil {
				pass, _ := u.User.Password()
				out = append(out, pass, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass)))
			}
			for _, vs := range u.Query() {
				out = append(out, vs...)
			}
		}
	}
	if cmd := spec.Command; cmd != nil {
		for _, kv := range cmd.Env {
			if _, v, ok := strings.Cut(kv, "="); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// jsonString is v as a JSON string, quotes included.
func jsonString(v string) string {
	b, _ := json.Marshal(v) // a string always marshals
	return string(b)
}

// jsonSpans follows a JSON text from its start, to tell whether a span lies
// inside one string, between two of its characters. Spans are asked for in
// increasing order of start, so the whole text is read once.
type jsonSpans struct {
	pos   int
	inStr bool
	esc   int // bytes of an escape still to come; -1 right after the backslash
}

// within reports whether b[start:end] lies within one JSON string, from
// one character boundary to another, and if so moves on to end.
func (j *jsonSpans) within(b []byte, start, end int) bool {
	j.advance(b, start)
	if !j.inStr || j.esc != 0 {
		return false
	}
	t := *j
	if !t.advance(b, end) || t.esc != 0 {
		return false
	}
	*j = t
	return true
}

// advance reads b up to to; it reports false if a string ended on the way.
func (j *jsonSpans) advance(b []byte, to int) bool {
	stayed := true
	for ; j.pos < to; j.pos++ {
		c := b[j.pos]
		switch {
		case !j.inStr:
			j.inStr = c == '"'
		case j.esc == -1:
			j.esc = 0
			if c == 'u' {
				j.esc = 4
			}
		case j.esc > 0:
			j.esc--
		case c == '\\':
			j.esc = -1
		case c == '"':
			j.inStr, stayed = false, false
		}
	}
	return stayed
}

// lowerHex is s with the hex digits of its percent-escapes in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower(b[i+1]), toLower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

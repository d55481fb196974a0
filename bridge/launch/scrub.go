package launch

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A Scrubber replaces every configured secret value in a text with
// "<redacted>". Secrets never go to a logger on purpose; the scrubber is for
// what the bridge quotes from elsewhere: an agent that echoes its
// Authorization header in a 401 body, a child that prints its token on
// stderr, an error that repeats a URL's query.
type Scrubber struct {
	r      *strings.Replacer // nil: nothing to scrub
	values []string
}

// minSecret is the shortest value scrubbed: shorter ones ("1", "yes") would
// blank out ordinary words and carry no credential worth the name.
const minSecret = 4

// NewScrubber returns a Scrubber for values.
func NewScrubber(values ...string) *Scrubber {
	vs := secretValues(values)
	if len(vs) == 0 {
		return &Scrubber{}
	}
	pairs := make([]string, 0, 2*len(vs))
	for _, v := range vs {
		pairs = append(pairs, v, "<redacted>")
	}
	return &Scrubber{r: strings.NewReplacer(pairs...), values: vs}
}

// secretValues returns the values worth scrubbing, longest first, so that a
// token inside a longer header value does not leave the rest of it behind.
func secretValues(values []string) []string {
	var vs []string
	for _, v := range values {
		if v = strings.TrimSpace(v); len(v) >= minSecret {
			vs = append(vs, v)
			// A JSON log line (--log-format json) or a quoted text value
			// carries the secret escaped: scrub that form too.
			for _, quoted := range []string{jsonString(v), strconv.Quote(v)} {
				if q := quoted[1 : len(quoted)-1]; q != v {
					vs = append(vs, q)
				}
			}
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(vs)
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
	if sc == nil || sc.r == nil {
		return s
	}
	return sc.r.Replace(s)
}

// Writer returns w with every write scrubbed. Loggers write a whole line per
// call, so a secret cannot be split between two writes.
func (sc *Scrubber) Writer(w io.Writer) io.Writer {
	if sc == nil || sc.r == nil {
		return w
	}
	return scrubWriter{w: w, sc: sc}
}

type scrubWriter struct {
	w  io.Writer
	sc *Scrubber
}

func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, s.sc.r.Replace(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Secrets lists the secret values of the agent: its handshake header values
// (and the token after a scheme such as "Bearer"), the values of the
// environment it is given, and the user info and query values of its URL
// (with the Basic credentials the WebSocket dial makes of them).
func (spec Agent) Secrets() []string {
	var out []string
	if ws := spec.WebSocket; ws != nil {
		for _, vs := range ws.Header {
			for _, v := range vs {
				out = append(out, v)
				if _, token, ok := strings.Cut(v, " "); ok {
					out = append(out, token)
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

package config

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
)

const redacted = "<redacted>"

// Secret is a string that never prints: every fmt verb, String, GoString
// and text or JSON marshalling yield "<redacted>". Header values and agent
// environment values are Secrets whatever their source, since they carry
// tokens (habit 15: header values and env() results are never logged).
// Convert with string(s) only where the value is used.
type Secret string

// String returns "<redacted>".
func (Secret) String() string { return redacted }

// GoString returns "<redacted>".
func (Secret) GoString() string { return redacted }

// Format writes "<redacted>" for every verb, so %x or %q cannot leak it.
func (Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// MarshalText returns "<redacted>", which covers encoding/json and loggers
// that encode values.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// String summarises the configuration for logs without secrets. Like the
// other String and GoString methods here it has a value receiver, so that
// printing a dereferenced value redacts too.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config{log_level=%q log_file=%q max_message=%d request_timeout=%v cancel_grace=%v default_agent=%q agents=[",
		c.LogLevel, c.LogFile, c.MaxMessage, c.RequestTimeout, c.CancelGrace, c.DefaultAgent)
	for i, a := range c.Agents {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	b.WriteString("]}")
	return b.String()
}

// GoString is String, so that %#v redacts too.
func (c Config) GoString() string { return c.String() }

// String describes the agent for logs: name, dialect and transport, with
// command arguments computed by env() and environment values redacted.
func (a Agent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent %q (dialect %s, ", a.Name, a.Dialect)
	if a.WebSocket != nil {
		b.WriteString(a.WebSocket.String())
	} else {
		b.WriteString("command")
		for _, arg := range a.Argv() {
			b.WriteString(" ")
			b.WriteString(arg)
		}
		if len(a.Env) > 0 {
			fmt.Fprintf(&b, ", env %s", redactedMap(a.Env))
		}
		if a.Dir != "" {
			fmt.Fprintf(&b, ", dir %s", a.Dir)
		}
	}
	b.WriteString(")")
	return b.String()
}

// GoString is String, so that %#v redacts too.
func (a Agent) GoString() string { return a.String() }

// Argv returns Command for display: arguments computed by env() are
// replaced by "<redacted>".
func (a Agent) Argv() []string {
	out := make([]string, len(a.Command))
	for i, arg := range a.Command {
		if i < len(a.argvFromEnv) && a.argvFromEnv[i] {
			arg = redacted
		}
		out[i] = arg
	}
	return out
}

// String describes the WebSocket transport for logs. The URL is shown
// without user info and query (where tokens travel), or not at all when it
// was computed by env(); header values are redacted.
func (w WebSocket) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "websocket %s", w.RedactedURL())
	if len(w.Headers) > 0 {
		fmt.Fprintf(&b, ", headers %s", redactedMap(w.Headers))
	}
	if len(w.Subprotocols) > 0 {
		fmt.Fprintf(&b, ", subprotocols %s", strings.Join(w.Subprotocols, ","))
	}
	return b.String()
}

// GoString is String, so that %#v redacts too.
func (w WebSocket) GoString() string { return w.String() }

// RedactedURL returns URL fit for logs: see String.
func (w WebSocket) RedactedURL() string {
	if w.urlFromEnv {
		return redacted
	}
	return redactURL(w.URL)
}

// redactURL keeps a URL's scheme, host and path, and replaces user info
// and the query, where tokens travel, by "<redacted>".
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return redacted
	}
	out := u.Scheme + "://"
	if u.User != nil {
		out += redacted + "@"
	}
	out += u.Host + u.EscapedPath()
	if u.RawQuery != "" || u.ForceQuery {
		out += "?" + redacted
	}
	return out
}

func redactedMap(m map[string]Secret) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + redacted
	}
	return "{" + strings.Join(keys, " ") + "}"
}

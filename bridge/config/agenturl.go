package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// CheckAgentURL reports what is wrong with raw as the address of an agent,
// or nil when the bridge can dial it. It is the one check behind --url and
// the websocket block's url, so that serve, doctor and config validate say
// the same thing. Its messages never repeat the URL's user info, path or
// query, which may carry a token: only the scheme, host and port at fault.
//
// Agents are reached over WebSocket (ws://, wss://: one JSON-RPC message a
// text message, which is also the ACP remote transport's WebSocket) or over
// the ACP remote transport's Streamable HTTP (http://, https://).
func CheckAgentURL(raw string) error {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || scheme == "" {
		return fmt.Errorf("it is not an absolute URL: write ws://HOST:PORT/PATH (or wss:// for TLS)")
	}
	switch strings.ToLower(scheme) {
	case "ws", "wss", "http", "https":
	default:
		return fmt.Errorf("scheme %q is not supported: use ws:// or wss:// for a WebSocket agent, http:// or https:// for an ACP remote (Streamable HTTP) endpoint", scheme)
	}
	hostport := rest
	if i := strings.IndexAny(hostport, "/?#"); i >= 0 {
		hostport = hostport[:i]
	}
	if i := strings.LastIndex(hostport, "@"); i >= 0 {
		hostport = hostport[i+1:] // user info is not shown
	}
	if hostport == "" {
		return fmt.Errorf("it has no host: write %s://HOST:PORT/PATH", scheme)
	}
	if strings.HasPrefix(hostport, "[") && !strings.Contains(hostport, "]") {
		return fmt.Errorf("host %q lacks its closing ']': write an IPv6 address as %s://[::1]:PORT/PATH", hostport, scheme)
	}
	u, err := url.Parse(raw)
	if err != nil {
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err // without the URL, which may carry a token
		}
		return fmt.Errorf("it is not a valid URL (%v) near host %q", cause, hostport)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("host %q has no host name before the port", hostport)
	}
	if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("host %q has a colon but no port after it: write %s://%sPORT/… or drop the colon for the default port", hostport, scheme, hostport)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %s of host %q is out of range: a port is 1 to 65535", p, hostport)
		}
	}
	return nil
}

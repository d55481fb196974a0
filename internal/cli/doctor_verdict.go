// Doctor's verdicts on a failed step and the fixes it gives: the
// likeliest cause from what the agent sent (failed, unmatched,
// wrongDialect, the ACP probe), what to do about a failed dial or link
// (fixDial, fixLink), and the small helpers the doctor files share
// (isHTTP, dialFunc, heardText, snippet).

package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/tidwall/gjson"
)

// failed reports a step whose request failed, by the likeliest cause the
// evidence shows: the agent refused the connection (a profile's reject),
// the link could not be opened or was refused (HTTP status, a dead
// process), frames no rule matched, or another dialect.
func (d *doctor) failed(ctx context.Context, step string, err error, spec launch.Agent, dial dialFunc) bool {
	h := d.heard.snapshot()
	switch cause := linkCause(err); {
	case h.rejected != "":
		return d.fail(fmt.Sprintf("%s: %s; %s", step, d.scrub(err.Error()), strings.TrimPrefix(h.rejected, "profile "+spec.Dialect+": ")),
			"the agent refused the credentials: check the token the profile sends"+readsEnv(h.rejected)+" and that it is valid for this agent (if the refusal is about something else, its words above say what)")
	case cause != nil && h.received == 0:
		return d.fail(step+": "+d.scrub(err.Error()), fixLink(cause, spec))
	case h.expect != "" && step == "initialize" && h.nearMiss == "":
		// The greeting never came, and nothing the agent sent looks like
		// a typo of it: wrongDialect says which frame it waited for.
	case h.unmatchN > 0:
		return d.unmatched(ctx, step, d.scrub(err.Error()), h, spec, dial)
	}
	return d.wrongDialect(ctx, step, err, spec, dial)
}

// readsEnv returns " (it reads NAME, … from the environment)" when a
// connect-rejected note names the variables the profile reads, else "".
func readsEnv(note string) string {
	const mark = "the profile reads the environment variable(s) "
	if _, names, ok := strings.Cut(note, mark); ok {
		return " (it reads " + names + " from the environment)"
	}
	return ""
}

// unmatched reports a step after which agent frames matched no rule of the
// dialect: they are the evidence, shown in the report, and the fix is the
// profile's match a typo broke (the rule that likely meant the frame), the
// ACP dialect when the frames are JSON-RPC 2.0, or a rule for them.
func (d *doctor) unmatched(ctx context.Context, step, what string, h heardSoFar, spec launch.Agent, dial dialFunc) bool {
	if h.nearMiss != "" {
		what = strings.ReplaceAll(what, rules.NearMissMark+h.nearMiss, "") // the fix quotes it
	}
	text := fmt.Sprintf("%s: %s; %d agent frame(s) matched no rule of dialect %s and were dropped: %s", step, what, h.unmatchN, spec.Dialect, strings.Join(h.unmatched, " | "))
	if h.nearMiss != "" {
		return d.fail(text, "edit the profile's match: "+h.nearMiss)
	}
	if fix, ok := d.fixJSONRPC(ctx, h, spec, dial); ok {
		return d.fail(text, fix)
	}
	fix := fmt.Sprintf("add a rule for these frames to dialect %s (an event whose match fits them; one without output if they mean nothing to an editor), or, if the agent speaks another protocol, pick its dialect (--%s NAME; 'acp-bridge dialects' lists them)", spec.Dialect, launch.FlagDialect)
	if h.jsonRPC != "" && !acpFamily(spec.Dialect) {
		fix += fmt.Sprintf("; its frames are JSON-RPC 2.0, as ACP's are: if it speaks ACP, use --%s acp", launch.FlagDialect)
	}
	return d.fail(text, fix)
}

// fixJSONRPC is the fix for an agent whose frames are JSON-RPC 2.0 under a
// dialect of another protocol, when the agent confirms it speaks ACP by
// answering an ACP initialize on a link of its own: the ACP dialect of the
// version it answers with. ok is false when it does not confirm (a rule
// profile over JSON-RPC, say).
func (d *doctor) fixJSONRPC(ctx context.Context, h heardSoFar, spec launch.Agent, dial dialFunc) (string, bool) {
	if h.jsonRPC == "" || acpFamily(spec.Dialect) {
		return "", false
	}
	v, ok := d.probeACP(ctx, dial)
	if !ok {
		return "", false
	}
	saw := fmt.Sprintf("the agent's frames are JSON-RPC 2.0 (%s), and asked in ACP, it answers initialize with protocolVersion %s", h.jsonRPC, v.Raw)
	switch {
	case v.Type == gjson.Number && v.Int() >= 1:
		return fmt.Sprintf("%s: it speaks ACP itself, use --%s acp (dialect = \"acp\" in its agent block)", saw, launch.FlagDialect), true
	case v.Type == gjson.String && strings.HasPrefix(v.Str, "0."):
		return fmt.Sprintf("%s: it speaks legacy ACP, use --%s acp-v0", saw, launch.FlagDialect), true
	}
	return "", false
}

// acpFamily reports whether dialect speaks ACP's JSON-RPC itself.
func acpFamily(dialect string) bool {
	return dialect == "acp" || dialect == "acp-v2" || dialect == "acp-v0"
}

// isHTTP reports whether spec reaches its agent over Streamable HTTP.
func isHTTP(spec launch.Agent) bool {
	if spec.WebSocket == nil {
		return false
	}
	u := strings.ToLower(spec.WebSocket.URL)
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

type dialFunc = func(context.Context, bridge.Spawn) (bridge.Link, error)

// heardText says what the agent sent, for a failed step.
func (d *doctor) heardText(h heardSoFar) string {
	var parts []string
	switch {
	case h.received == 0 && h.noiseN == 0:
		parts = append(parts, fmt.Sprintf("the agent sent nothing (acp-bridge sent it %d frame(s))", h.sent))
	case h.received > 0:
		parts = append(parts, fmt.Sprintf("the agent sent %d frame(s): %s", h.received, strings.Join(h.frames, " | ")))
	}
	if h.noiseN > 0 {
		parts = append(parts, fmt.Sprintf("it printed %d line(s) that are not JSON: %s", h.noiseN, strings.Join(quoteAll(h.noise), " | ")))
	}
	return strings.Join(parts, "; ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// wrongDialect reports a step that failed although the link is up: from
// what the agent sent (or did not), it names the likely cause — a connect
// frame that never came, an agent that speaks ACP or legacy ACP, output
// that is not JSON — and what to do.
func (d *doctor) wrongDialect(ctx context.Context, step string, err error, spec launch.Agent, dial dialFunc) bool {
	h := d.heard.snapshot()
	what := fmt.Sprintf("%s: %v; %s", step, err, d.heardText(h))
	pick := fmt.Sprintf("pick the dialect it speaks (--%s NAME, or dialect = \"NAME\" in its agent block; 'acp-bridge dialects' lists them)", launch.FlagDialect)
	// A profile waiting for its connect frame: say which frame never came.
	if h.expect != "" && step == "initialize" {
		return d.fail(fmt.Sprintf("%s: %s, which never came; %s", step, strings.TrimPrefix(h.expect, "profile "), d.heardText(h)),
			"the agent does not greet as dialect "+spec.Dialect+" expects: check the URL or command, or "+pick)
	}
	// Ask the agent itself, on a link of its own, whether it speaks ACP.
	if spec.Dialect != "acp" {
		if v, ok := d.probeACP(ctx, dial); ok {
			switch {
			case v.Type == gjson.Number && v.Int() >= 1:
				return d.fail(what+fmt.Sprintf("; asked in ACP, the agent answers initialize with protocolVersion %s", v.Raw),
					fmt.Sprintf("the agent speaks ACP itself: use --%s acp (dialect = \"acp\" in its agent block)", launch.FlagDialect))
			case v.Type == gjson.String && strings.HasPrefix(v.Str, "0.") && spec.Dialect != "acp-v0":
				return d.fail(what+fmt.Sprintf("; asked in ACP, the agent answers initialize with protocolVersion %s", v.Raw),
					fmt.Sprintf("the agent speaks legacy ACP %s: use --%s acp-v0", v.Str, launch.FlagDialect))
			}
		}
	}
	if h.received == 0 && h.noiseN > 0 {
		return d.fail(what, fmt.Sprintf("the agent writes text, not the JSON frames of dialect %s, on its stdout: if it is an agent's log, make it log to stderr; else %s", spec.Dialect, pick))
	}
	if h.received == 0 {
		return d.fail(what, fmt.Sprintf("check that the agent speaks dialect %s over this transport (see 'acp-bridge dialects'), and run with --log-level debug to see its output", spec.Dialect))
	}
	return d.fail(what, "the agent does not seem to speak dialect "+spec.Dialect+": "+pick)
}

// probeACP opens a link of its own to the agent, sends an ACP initialize
// and returns the protocolVersion of the answer, if one comes within a few
// seconds.
func (d *doctor) probeACP(ctx context.Context, dial dialFunc) (gjson.Result, bool) {
	stop := d.waiting("the agent's answer to an ACP initialize")
	defer stop()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	link, err := dial(pctx, bridge.Spawn{})
	if err != nil {
		return gjson.Result{}, false
	}
	defer link.Close()
	const id = `"acp-bridge-doctor-probe"`
	if err := link.Write(pctx, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)); err != nil {
		return gjson.Result{}, false
	}
	for {
		frame, err := link.Read(pctx)
		if err != nil {
			return gjson.Result{}, false
		}
		if gjson.GetBytes(frame, "jsonrpc").Str == "2.0" && gjson.GetBytes(frame, "id").Raw == id {
			v := gjson.GetBytes(frame, "result.protocolVersion")
			return v, v.Exists()
		}
	}
}

// linkCause returns a cause for err when it is the engine saying the agent
// link could not be opened or was lost, else nil.
func linkCause(err error) error {
	var rpcErr *acpclient.Error
	if !errors.As(err, &rpcErr) {
		return nil
	}
	msg := rpcErr.Message
	for _, marker := range []string{"unreachable", "handshake", "not started", "executable", "exited", "certificate", "x509"} {
		if strings.Contains(msg, marker) {
			return errors.New(msg)
		}
	}
	if httpStatus(msg) != 0 {
		return errors.New(msg) // a Streamable HTTP endpoint refused the request
	}
	return nil
}

// httpStatus returns the status of the first "HTTP NNN" in msg, else 0.
func httpStatus(msg string) int {
	for rest := msg; ; {
		i := strings.Index(rest, "HTTP ")
		if i < 0 {
			return 0
		}
		rest = rest[i+len("HTTP "):]
		if len(rest) >= 3 {
			if n, err := strconv.Atoi(rest[:3]); err == nil && n >= 100 && n <= 599 && (len(rest) == 3 || rest[3] < '0' || rest[3] > '9') {
				return n
			}
		}
	}
}

// fixDial says what to do about a failed WebSocket dial, by its cause.
func fixDial(err error, spec launch.Agent) string {
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var opErr *net.OpError
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA) || errors.As(err, &verify) && errors.As(verify.Err, &unknownCA) || strings.Contains(msg, "certificate signed by unknown authority"):
		return fmt.Sprintf("TLS: the agent's certificate is signed by a CA this machine does not trust; give that CA's PEM file with --%s FILE (ca_file in the websocket block)", launch.FlagCAFile)
	case errors.As(err, &hostname) || strings.Contains(msg, "certificate is valid for"):
		return "TLS: the agent's certificate is not valid for the host in the URL; use the host name the certificate names"
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:"):
		return "TLS: the secure handshake failed; check that the agent serves wss:// on this port (or use ws:// if it serves plain WebSocket)"
	case httpStatus(msg) == 401 || httpStatus(msg) == 403:
		how := fmt.Sprintf("--%s Authorization=ENVVAR, the variable holding \"Bearer <token>\" (or headers = { Authorization = … } in the agent's websocket block)", launch.FlagHeader)
		if len(spec.WebSocket.Header) > 0 || strings.Contains(spec.WebSocket.URL, "@") {
			return fmt.Sprintf("the server wants a token and refused the credentials sent (HTTP %d): check that the header's variable holds a valid token (%s)", httpStatus(msg), how)
		}
		return fmt.Sprintf("the server wants a token (HTTP %d) and none was sent: give it with %s", httpStatus(msg), how)
	case httpStatus(msg) == 404:
		if isHTTP(spec) {
			return "the URL's path is not the agent's ACP endpoint; check the path in the URL"
		}
		return "the URL's path is not the agent's WebSocket endpoint; check the path in the URL"
	case strings.Contains(msg, "handshake refused"):
		return "the server at this URL answered HTTP but did not accept a WebSocket; check the URL"
	case strings.Contains(msg, "connection refused"):
		return fmt.Sprintf("nothing listens at %s: start the agent or fix the URL (its host and port)", spec.WebSocket.URL)
	case strings.Contains(msg, "no such host"):
		return fmt.Sprintf("the host in %s is not known: fix the URL's host name", spec.WebSocket.URL)
	case strings.Contains(msg, "unreachable") || errors.As(err, &opErr):
		return fmt.Sprintf("nothing answers at %s: start the agent, or check the host and port in the URL (and any firewall between)", spec.WebSocket.URL)
	case httpStatus(msg) != 0:
		return fmt.Sprintf("the server at %s refused the request (HTTP %d): check that the URL is the agent's ACP endpoint, and see its words above", spec.WebSocket.URL, httpStatus(msg))
	}
	return "run with --log-level debug for the details of the dial"
}

// fixLink says what to do when the engine could not open or keep the link.
func fixLink(cause error, spec launch.Agent) string {
	msg := cause.Error()
	switch {
	case errors.Is(cause, fs.ErrNotExist) || strings.Contains(msg, "not started"):
		return "the agent's command could not be started: check the command and its working directory (dir)"
	case strings.Contains(msg, "exited"):
		return "the agent exited: run its command by hand to see why, or run doctor with --log-level debug to see its stderr"
	}
	if spec.WebSocket != nil {
		return fixDial(cause, spec)
	}
	return "run doctor with --log-level debug to see the agent's stderr"
}

// snippet returns b for a report: at most n bytes, on one line.
func snippet(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

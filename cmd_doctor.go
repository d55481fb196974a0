package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
	"github.com/urfave/cli/v2"
)

// doctorStepTimeout bounds each step of doctor (the dial, initialize,
// session/new) unless --request-timeout says otherwise: long enough for a
// child that starts slowly, short enough that a silent agent is reported
// rather than waited for.
const doctorStepTimeout = 20 * time.Second

// doctorAction checks the agent the same command line would serve: it
// resolves the agent and its dialect as serving does, dials it with the same
// dialer, then puts the same engine (launch.NewBridge) in front of it and
// runs initialize and session/new from a small editor (acpclient). It
// prints what works and, for the first thing that does not, the cause and
// what to do, in plain words; the exit status is 1 when something fails.
func doctorAction(c *cli.Context) error {
	if c.Args().Len() > 0 && c.App.Metadata["dashdash"] != true {
		return launch.Usagef("%q is not an argument of doctor. An agent command goes after --: acp-bridge doctor -- %s",
			c.Args().First(), strings.Join(c.Args().Slice(), " "))
	}
	r, err := resolveAgent(c)
	if err != nil {
		return err
	}
	f, s, spec := r.flags, r.settings, r.spec
	// Doctor speaks to a person on stdout; logs stay quiet unless asked.
	quiet, err := quietSettings(c)
	if err != nil {
		return err
	}
	s.LogLevel, s.LogFile, s.LogFormat = quiet.LogLevel, quiet.LogFile, quiet.LogFormat
	if !f.Set[launch.FlagRequestTimeout] {
		s.RequestTimeout = doctorStepTimeout
	}
	logger, closeLog, err := launch.NewScrubbedLogger(s, launch.NewScrubber(spec.Secrets()...))
	if err != nil {
		return err
	}
	defer closeLog.Close()

	d := &doctor{
		out:      os.Stdout,
		scrub:    launch.NewScrubber(spec.Secrets()...).Scrub,
		progress: launch.NewProgress(os.Stderr),
		timeout:  s.RequestTimeout,
	}
	if d.timeout <= 0 {
		d.timeout = doctorStepTimeout
	}
	d.say("agent:   %s", spec.Desc)
	ok := d.run(c.Context, spec, r.dialect, r.newTranslator, s, logger)
	d.progress.Clear()
	if !ok {
		return launch.ReportedError{Err: errors.New("doctor found a problem")}
	}
	d.say("all good: an editor can use this agent through acp-bridge")
	return nil
}

// doctor prints a report line by line.
type doctor struct {
	out      io.Writer
	scrub    func(string) string
	progress *launch.Progress
	timeout  time.Duration
}

func (d *doctor) say(format string, args ...any) {
	d.progress.Clear()
	fmt.Fprintln(d.out, d.scrub(fmt.Sprintf(format, args...)))
}

func (d *doctor) pass(format string, args ...any) { d.say("ok       "+format, args...) }

// fail reports a failed step: what happened, and what to do about it.
func (d *doctor) fail(what, fix string) bool {
	d.say("FAILED   %s", what)
	d.say("to fix:  %s", fix)
	return false
}

func (d *doctor) run(ctx context.Context, spec launch.Agent, dialect translate.Dialect, newTranslator func() translate.Translator, s launch.Settings, logger hclog.Logger) bool {
	dial := spec.Dialer(logger, s.MaxMessage)

	// Step 1: the transport alone, so that a refused connection, a
	// certificate or a token is told apart from a protocol problem.
	if spec.Command != nil {
		d.progress.Step("doctor: looking for %s", spec.Command.Path)
		p, err := exec.LookPath(spec.Command.Path)
		if err != nil {
			return d.fail(fmt.Sprintf("the agent's executable %q was not found: %v", spec.Command.Path, errors.Unwrap(err)),
				"install it, or give its full path (command = [\"/path/to/agent\", …] in the agent block, or after --); "+
					"an editor may start acp-bridge with a shorter PATH than your shell's")
		}
		d.pass("executable %s", p)
	} else {
		d.progress.Step("doctor: dialling %s", spec.WebSocket.URL)
		dctx, cancel := context.WithTimeout(ctx, d.timeout)
		link, err := dial(dctx, bridge.Spawn{})
		cancel()
		if err != nil {
			return d.fail(d.scrub(err.Error()), fixDial(err, spec))
		}
		link.Close()
		d.pass("WebSocket handshake with %s", spec.WebSocket.URL)
	}

	// Step 2: the engine in front of the agent, as serving composes it.
	b := launch.NewBridge(spec, dialect, newTranslator, s, logger, versionString())
	var mu sync.Mutex
	var agentFrames int
	var firstFrame string
	b.Tap = func(ev bridge.TapEvent) {
		if ev.Hop == bridge.AgentHop && ev.Inbound {
			mu.Lock()
			if agentFrames == 0 {
				firstFrame = snippet(ev.Message, 160)
			}
			agentFrames++
			mu.Unlock()
		}
	}
	heard := func() (int, string) {
		mu.Lock()
		defer mu.Unlock()
		return agentFrames, firstFrame
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- b.Serve(serveCtx, inR, outW) }()
	conn := acpclient.New(outR, inW, acpclient.Handler{
		Request: func(method string, _ json.RawMessage) (any, *acpclient.Error) {
			if method == "session/request_permission" {
				return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}, nil
			}
			return nil, &acpclient.Error{Code: translate.CodeMethodNotFound, Message: "doctor's editor does not serve " + method}
		},
	})
	defer func() {
		conn.Close()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			stop()
			<-served
		}
		inR.CloseWithError(io.ErrClosedPipe)
		outW.Close()
	}()

	wrongDialect := func(step string, err error) bool {
		n, first := heard()
		if n == 0 {
			return d.fail(fmt.Sprintf("%s: %v; the agent sent nothing", step, err),
				fmt.Sprintf("check that the agent speaks dialect %s over this transport (see 'acp-bridge dialects'), and run with --log-level debug to see its output", spec.Dialect))
		}
		return d.fail(fmt.Sprintf("%s: %v; the agent did answer, %d message(s), the first: %s", step, err, n, first),
			fmt.Sprintf("the agent does not seem to speak dialect %s: pick the dialect it speaks (--%s NAME, or dialect = \"NAME\" in its agent block; 'acp-bridge dialects' lists them)", spec.Dialect, launch.FlagDialect))
	}

	d.progress.Step("doctor: initialize")
	ictx, cancel := context.WithTimeout(ctx, d.timeout+5*time.Second)
	res, err := conn.Call(ictx, "initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "acp-bridge-doctor", "version": versionString()},
	})
	cancel()
	if err != nil {
		if cause := linkCause(err); cause != nil {
			return d.fail("initialize: "+d.scrub(err.Error()), fixLink(cause, spec))
		}
		return wrongDialect("initialize", err)
	}
	info := gjson.GetBytes(res, "agentInfo")
	name := info.Get("name").Str
	if name == "" {
		name = "(no agentInfo)"
	}
	d.pass("initialize: %s %s, protocol version %s", name, info.Get("version").Str, gjson.GetBytes(res, "protocolVersion").Raw)
	if auth := gjson.GetBytes(res, "authMethods"); len(auth.Array()) > 0 {
		var ids []string
		for _, m := range auth.Array() {
			ids = append(ids, m.Get("id").Str)
		}
		d.say("note     the agent offers authentication: %s", strings.Join(ids, ", "))
	}

	d.progress.Step("doctor: session/new")
	cwd, err := os.Getwd()
	if err != nil {
		cwd = os.TempDir()
	}
	sctx, cancel := context.WithTimeout(ctx, d.timeout+5*time.Second)
	res, err = conn.Call(sctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	cancel()
	if err != nil {
		var rpcErr *acpclient.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == translate.CodeAuthRequired {
			return d.fail("session/new: the agent requires authentication: "+d.scrub(rpcErr.Message),
				"log in as the agent's documentation says (for Gemini CLI, run gemini once or set GEMINI_API_KEY in the agent's env), then run doctor again")
		}
		if cause := linkCause(err); cause != nil {
			return d.fail("session/new: "+d.scrub(err.Error()), fixLink(cause, spec))
		}
		return wrongDialect("session/new", err)
	}
	d.pass("session/new: session %s in %s", gjson.GetBytes(res, "sessionId").Str, cwd)
	return true
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
	return nil
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
	case strings.Contains(msg, "HTTP 401") || strings.Contains(msg, "HTTP 403"):
		return fmt.Sprintf("auth: the agent refused the credentials; check the handshake headers (headers = { Authorization = … } in the websocket block, or --%s NAME=ENVVAR) and that the environment variable holds a valid token", launch.FlagHeader)
	case strings.Contains(msg, "HTTP 404"):
		return "the URL's path is not the agent's WebSocket endpoint; check the path in the URL"
	case strings.Contains(msg, "handshake refused"):
		return "the server at this URL answered HTTP but did not accept a WebSocket; check the URL"
	case strings.Contains(msg, "unreachable") || errors.As(err, &opErr):
		return fmt.Sprintf("nothing answers at %s: start the agent, or check the host and port in the URL (and any firewall between)", spec.WebSocket.URL)
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

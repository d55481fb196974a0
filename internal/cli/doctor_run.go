// Doctor's run: the transport alone (the executable, or the dial), then
// the engine in front of the agent, initialize and session/new from
// doctor's own editor, and the prompt turn when one is due.

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

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
		// Lines the agent prints that are not JSON are evidence too: a
		// child that logs to stdout, or speaks plain text.
		cmd := *spec.Command
		prev := cmd.OnNoise
		cmd.OnNoise = func(line []byte) {
			d.heard.noiseLine(line)
			if prev != nil {
				prev(line)
			}
		}
		spec.Command = &cmd
	} else {
		step := "WebSocket handshake with"
		if isHTTP(spec) {
			step = "Streamable HTTP endpoint"
		}
		stop := d.waiting("the " + step + " " + spec.WebSocket.URL)
		dctx, cancel := context.WithTimeout(ctx, d.timeout)
		link, err := dial(dctx, bridge.Spawn{})
		cancel()
		stop()
		if err != nil {
			return d.fail(d.scrub(err.Error()), fixDial(err, spec))
		}
		link.Close()
		// Streamable HTTP sends nothing before initialize: its dial only
		// checks the URL, so the endpoint is vouched for by initialize.
		if !isHTTP(spec) {
			d.pass("%s %s", step, spec.WebSocket.URL)
		}
	}

	// Step 2: the engine in front of the agent, as serving composes it.
	b := launch.NewBridge(spec, dialect, newTranslator, s, logger, versionString())
	b.Tap = d.heard.tap
	turn := &turnWatch{}
	conn, end := serveInProcess(ctx, b, acpclient.Handler{
		Request: func(method string, params json.RawMessage) (any, *acpclient.Error) {
			if method == "session/request_permission" {
				turn.asked()
				return refusePermission(params), nil
			}
			return nil, &acpclient.Error{Code: translate.CodeMethodNotFound, Message: "doctor's editor does not serve " + method}
		},
		Notification: func(method string, params json.RawMessage) {
			if method == "session/update" {
				turn.update(params)
			}
		},
	})
	defer end()

	call := func(method string, params any) (json.RawMessage, error) {
		stop := d.waiting(method)
		defer stop()
		cctx, cancel := context.WithTimeout(ctx, d.timeout+5*time.Second)
		defer cancel()
		return conn.Call(cctx, method, params)
	}
	res, err := call("initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": false, "writeTextFile": false}, "terminal": false},
		"clientInfo":         map[string]string{"name": "acp-bridge-doctor", "version": versionString()},
	})
	if err != nil {
		return d.failed(ctx, "initialize", err, spec, dial)
	}
	if isHTTP(spec) {
		d.pass("Streamable HTTP endpoint %s", spec.WebSocket.URL)
	}
	info := gjson.GetBytes(res, "agentInfo")
	name := info.Get("name").Str
	if name == "" {
		name = "(no agentInfo)"
	}
	bridgeAnswered := d.heard.snapshot().received == 0
	how := ""
	if bridgeAnswered {
		how = " (answered by acp-bridge: dialect " + spec.Dialect + " has no initialize of its own)"
	}
	version := gjson.GetBytes(res, "protocolVersion").Raw
	if p := gjson.GetBytes(res, "_meta.acp-bridge.agentProtocol"); p.Exists() && p.Raw != version {
		version = p.Raw + " (editors are spoken to in " + version + ")"
	}
	d.pass("initialize: %s %s, protocol version %s%s", name, info.Get("version").Str, version, how)
	if auth := gjson.GetBytes(res, "authMethods"); len(auth.Array()) > 0 {
		var ids []string
		for _, m := range auth.Array() {
			ids = append(ids, m.Get("id").Str)
		}
		d.note("the agent offers authentication: %s", strings.Join(ids, ", "))
	}

	cwd, err := os.Getwd()
	if err != nil {
		cwd = os.TempDir()
	}
	res, err = call("session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if err != nil {
		var rpcErr *acpclient.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == translate.CodeAuthRequired {
			return d.fail("session/new: the agent requires authentication: "+d.scrub(rpcErr.Message),
				"log in as the agent's documentation says (for Gemini CLI, run gemini once or set GEMINI_API_KEY in the agent's env), then run doctor again")
		}
		return d.failed(ctx, "session/new", err, spec, dial)
	}
	sid := gjson.GetBytes(res, "sessionId").Str
	d.pass("session/new: session %s in %s", sid, cwd)

	// Step 3: at least one frame from the agent, for every dialect.
	prompt := d.prompt
	if prompt == "" {
		if h := d.heard.snapshot(); h.received > 0 {
			if h.unmatchN > 0 {
				return d.unmatched(ctx, "agent frames", "initialize and session/new worked", h, spec, dial)
			}
			return true
		}
		prompt = doctorPrompt
		d.note("the agent has not spoken yet (dialect %s answers initialize and session/new in the bridge); a short prompt checks that it answers: %q", spec.Dialect, prompt)
	}
	return d.promptTurn(ctx, conn, turn, sid, prompt, spec, dial)
}

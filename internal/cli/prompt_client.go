package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/acp-bridge/acp-bridge/bridge/localfs"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// prompter is prompt's editor: it drives one turn through the engine and
// prints it. Its handlers run on the connection's reader goroutine, one at
// a time; mu guards what they share with run.
type prompter struct {
	out, diag io.Writer
	json      bool // one JSON line per session/update, then the stop reason
	dim       bool // stdout is a terminal: thoughts are dimmed, not prefixed
	answer    string
	tty       *bufio.Reader // where permission questions are answered; nil: none
	cwd       string
	maxBytes  int64

	// cancelled is closed at the first Ctrl-C, once the turn has started:
	// a permission question waiting for the terminal is answered cancelled.
	cancelled chan struct{}

	mu      sync.Mutex
	ended   bool   // the turn's answer came: later updates are not printed
	kind    string // the stream a line is open for: "msg" or "thought"
	midLine bool   // the last byte written to out was not a newline
	tools   map[string]*toolSeen
}

// toolSeen is what was printed of a tool call.
type toolSeen struct{ title, kind, status string }

// run starts the engine on pipes, runs initialize, session/new and the
// prompt, and returns the turn's stop reason, or the error that ended it.
// The first cancellation of ctx (Ctrl-C) sends session/cancel and waits for
// the answer; Run restores the default signal handling then, so a second
// Ctrl-C ends the process at once.
func (p *prompter) run(ctx context.Context, b *bridge.Bridge, text string) (string, error) {
	p.cancelled = make(chan struct{})
	// The engine outlives the first Ctrl-C: it carries the cancellation.
	conn, end := serveInProcess(context.WithoutCancel(ctx), b, acpclient.Handler{Request: p.request, Notification: p.notification})
	defer end()

	if _, err := conn.Call(ctx, "initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{"fs": map[string]bool{"readTextFile": true, "writeTextFile": true}, "terminal": false},
		"clientInfo":         map[string]string{"name": "acp-bridge-prompt", "version": versionString()},
	}); err != nil {
		return "", callError("initialize", ctx, err)
	}
	res, err := conn.Call(ctx, "session/new", map[string]any{"cwd": p.cwd, "mcpServers": []any{}})
	if err != nil {
		return "", callError("session/new", ctx, err)
	}
	sid := gjson.GetBytes(res, "sessionId").Str
	turn, err := conn.Start("session/prompt", map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
	if err != nil {
		return "", callError("session/prompt", ctx, err)
	}
	interrupt := ctx.Done()
	for {
		select {
		case <-interrupt:
			interrupt = nil
			close(p.cancelled)
			p.note("cancelling the turn (Ctrl-C again quits at once)")
			if err := conn.Notify("session/cancel", map[string]any{"sessionId": sid}); err != nil {
				return "", fmt.Errorf("session/cancel: %w", err)
			}
			continue
		case <-turn.Done():
		}
		break
	}
	res, err = turn.Wait(context.Background())
	p.mu.Lock()
	p.ended = true
	p.endLine()
	p.mu.Unlock()
	if err != nil {
		return "", callError("session/prompt", nil, err)
	}
	return gjson.GetBytes(res, "stopReason").Str, nil
}

// callError says why a call failed: Ctrl-C before the turn, the agent's
// error answer, or the end of the engine.
func callError(method string, ctx context.Context, err error) error {
	switch {
	case ctx != nil && ctx.Err() != nil:
		return fmt.Errorf("%s: interrupted", method)
	case errors.Is(err, acpclient.ErrClosed):
		return fmt.Errorf("%s: the bridge stopped before answering (run with --log-level debug to see why)", method)
	}
	return fmt.Errorf("%s: %w", method, err)
}

// note writes a diagnostic line to stderr, after the line open on stdout
// when both are the terminal.
func (p *prompter) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.midLine && p.dim {
		p.endLine()
	}
	fmt.Fprintf(p.diag, "acp-bridge: "+format+"\n", args...)
}

// final writes the last JSON line.
func (p *prompter) final(v any) {
	b, _ := json.Marshal(v)
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "%s\n", b)
}

func (p *prompter) notification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if p.json {
		fmt.Fprintf(p.out, "%s\n", params)
		return
	}
	p.render(gjson.GetBytes(params, "update"))
}

// render prints one update in the readable view: the agent's text as it
// comes, thoughts dimmed (or prefixed when stdout is not a terminal), tool
// calls by title and kind with each change of status, plans entry by entry.
func (p *prompter) render(u gjson.Result) {
	switch u.Get("sessionUpdate").Str {
	case "agent_message_chunk":
		p.stream("msg", blockText(u.Get("content")))
	case "agent_thought_chunk":
		p.stream("thought", blockText(u.Get("content")))
	case "tool_call":
		id := u.Get("toolCallId").Str
		t := &toolSeen{title: u.Get("title").Str, kind: u.Get("kind").Str, status: u.Get("status").Str}
		if t.kind == "" {
			t.kind = "other"
		}
		if t.status == "" {
			t.status = "pending"
		}
		p.tools[id] = t
		p.line(fmt.Sprintf("[tool] %s (%s): %s", t.title, t.kind, t.status))
	case "tool_call_update":
		id := u.Get("toolCallId").Str
		t := p.tools[id]
		if t == nil {
			t = &toolSeen{title: id, kind: "other"}
			p.tools[id] = t
		}
		if title := u.Get("title").Str; title != "" {
			t.title = title
		}
		if status := u.Get("status").Str; status != "" && status != t.status {
			t.status = status
			p.line(fmt.Sprintf("[tool] %s (%s): %s", t.title, t.kind, t.status))
		}
	case "plan":
		p.line("[plan]")
		u.Get("entries").ForEach(func(_, e gjson.Result) bool {
			p.line(fmt.Sprintf("  [%s] %s", e.Get("status").Str, e.Get("content").Str))
			return true
		})
	}
}

// blockText is a content block's text, or its type for other blocks.
func blockText(c gjson.Result) string {
	if t := c.Get("type").Str; t != "text" {
		return "[" + t + "]"
	}
	return c.Get("text").Str
}

// stream writes a chunk of the agent's text or thought, continuing the
// open line when it is of the same stream.
func (p *prompter) stream(kind, text string) {
	if text == "" {
		return
	}
	if p.kind != kind {
		p.endLine()
		p.kind = kind
	}
	for _, piece := range strings.SplitAfter(text, "\n") {
		if piece == "" {
			continue
		}
		switch {
		case kind == "thought" && p.dim:
			body := strings.TrimSuffix(piece, "\n")
			fmt.Fprintf(p.out, "\x1b[2m%s\x1b[0m%s", body, piece[len(body):])
		case kind == "thought" && !p.midLine:
			fmt.Fprintf(p.out, "[thought] %s", piece)
		default:
			io.WriteString(p.out, piece)
		}
		p.midLine = !strings.HasSuffix(piece, "\n")
	}
}

// line writes a line of its own.
func (p *prompter) line(s string) {
	p.endLine()
	fmt.Fprintln(p.out, s)
}

// endLine ends the open line, if any.
func (p *prompter) endLine() {
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
	p.kind = ""
}

// request answers the agent's requests: permission questions, files in the
// session's directory, and a refusal for terminals and the rest.
func (p *prompter) request(method string, params json.RawMessage) (any, *acpclient.Error) {
	switch method {
	case "session/request_permission":
		return p.permission(params), nil
	case "fs/read_text_file":
		path := gjson.GetBytes(params, "path").Str
		text, err := localfs.Read(context.Background(), p.cwd, path, int(gjson.GetBytes(params, "line").Int()), int(gjson.GetBytes(params, "limit").Int()), p.maxBytes)
		if err != nil {
			p.note("refused to read %s: %v", path, err)
			return nil, promptFSError(path, err)
		}
		return map[string]any{"content": text}, nil
	case "fs/write_text_file":
		path := gjson.GetBytes(params, "path").Str
		if err := localfs.Write(context.Background(), p.cwd, path, gjson.GetBytes(params, "content").Str, p.maxBytes); err != nil {
			p.note("refused to write %s: %v", path, err)
			return nil, promptFSError(path, err)
		}
		p.note("the agent wrote %s", path)
		return map[string]any{}, nil
	}
	if strings.HasPrefix(method, "terminal/") {
		p.note("refused %s: acp-bridge prompt runs no terminals", method)
		return nil, &acpclient.Error{Code: translate.CodeMethodNotFound,
			Message: method + ": acp-bridge prompt runs no terminals (it does not advertise the terminal capability); run the command without one"}
	}
	return nil, &acpclient.Error{Code: translate.CodeMethodNotFound, Message: "acp-bridge prompt does not serve " + method}
}

// promptFSError is the answer to a file request that failed, as the
// engine's own file service answers (bridge/fsfallback.go).
func promptFSError(path string, err error) *acpclient.Error {
	switch {
	case errors.Is(err, localfs.ErrOutsideRoot), errors.Is(err, localfs.ErrNotAbsolute),
		errors.Is(err, localfs.ErrNotRegular), errors.Is(err, localfs.ErrTooLarge):
		return &acpclient.Error{Code: translate.CodeInvalidParams, Message: err.Error()}
	case errors.Is(err, fs.ErrNotExist):
		return &acpclient.Error{Code: translate.CodeResourceNotFound, Message: path + ": no such file"}
	}
	return &acpclient.Error{Code: translate.CodeInternalError, Message: err.Error()}
}

// permissionOption is one of the agent's answers to a permission question.
type permissionOption struct{ id, name, kind string }

// permission answers session/request_permission: --yes takes the
// allow-once option, --no (and no terminal to ask on) the reject one;
// otherwise the question is asked on the terminal. What was chosen is said
// on stderr.
func (p *prompter) permission(params json.RawMessage) any {
	title := gjson.GetBytes(params, "toolCall.title").Str
	if title == "" {
		if t := p.tools[gjson.GetBytes(params, "toolCall.toolCallId").Str]; t != nil {
			title = t.title
		}
	}
	var opts []permissionOption
	gjson.GetBytes(params, "options").ForEach(func(_, o gjson.Result) bool {
		opts = append(opts, permissionOption{o.Get("optionId").Str, o.Get("name").Str, o.Get("kind").Str})
		return true
	})
	cancelled := map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
	var chosen *permissionOption
	why := ""
	switch {
	case p.answer == "yes":
		chosen, why = pickOption(opts, "allow_once", "allow_always"), "--yes"
	case p.answer == "no":
		chosen, why = pickOption(opts, "reject_once", "reject_always"), "--no"
	case p.tty == nil:
		chosen, why = pickOption(opts, "reject_once", "reject_always"), "no terminal to ask on; --yes allows"
	default:
		var ok bool
		if chosen, ok = p.ask(title, opts); !ok {
			p.note("permission for %q: cancelled", title)
			return cancelled
		}
		why = "your choice"
	}
	if chosen == nil {
		p.note("permission for %q: cancelled (%s, and the agent offers no such option)", title, why)
		return cancelled
	}
	p.note("permission for %q: %s (%s; %s)", title, chosen.name, chosen.id, why)
	return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": chosen.id}}
}

// pickOption is the first option of the first of kinds that has one.
func pickOption(opts []permissionOption, kinds ...string) *permissionOption {
	for _, k := range kinds {
		for i := range opts {
			if opts[i].kind == k {
				return &opts[i]
			}
		}
	}
	return nil
}

// ask lists the options on stderr and reads a choice, by number or id, from
// the terminal; false when the input ends or the turn is cancelled.
func (p *prompter) ask(title string, opts []permissionOption) (*permissionOption, bool) {
	p.mu.Lock()
	p.endLine()
	fmt.Fprintf(p.diag, "acp-bridge: the agent asks permission: %s\n", title)
	for i, o := range opts {
		fmt.Fprintf(p.diag, "  %d) %s (%s)\n", i+1, o.name, o.kind)
	}
	p.mu.Unlock()
	for {
		fmt.Fprintf(p.diag, "choose 1-%d: ", len(opts))
		line, ok := p.readLine()
		if !ok {
			fmt.Fprintln(p.diag)
			return nil, false
		}
		line = strings.TrimSpace(line)
		if n, err := strconv.Atoi(line); err == nil && n >= 1 && n <= len(opts) {
			return &opts[n-1], true
		}
		for i := range opts {
			if line == opts[i].id {
				return &opts[i], true
			}
		}
	}
}

// readLine reads a line from the terminal, or gives up at Ctrl-C.
func (p *prompter) readLine() (string, bool) {
	got := make(chan string, 1)
	go func() {
		line, err := p.tty.ReadString('\n')
		if err != nil && line == "" {
			close(got)
			return
		}
		got <- line
	}()
	select {
	case line, ok := <-got:
		return line, ok
	case <-p.cancelled:
		return "", false
	}
}

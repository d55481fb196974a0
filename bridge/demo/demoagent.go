package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"
)

// Direction says which way a frame tapped from the demo agent travelled.
type Direction int

const (
	// ToAgent is a frame the agent received from the bridge.
	ToAgent Direction = iota + 1
	// FromAgent is a frame the agent sent to the bridge.
	FromAgent
)

// Agent timing. The delays are short enough that the whole demo runs in about
// a second and long enough that streaming is visible in a terminal.
const (
	// agentWriteWait bounds one frame write; the bridge reads continuously,
	// so a stalled write means the bridge is gone.
	agentWriteWait = 5 * time.Second
	// agentReadLimit is the largest frame the agent accepts.
	agentReadLimit = 1 << 20
	// slowChunkDelay paces the slow script, so that an editor's cancel
	// lands mid-turn.
	slowChunkDelay = 100 * time.Millisecond
	// slowCount is how far the slow script counts.
	slowCount = 20
)

// legacyProtocolVersion is what every Gemini CLI release that spoke the old
// protocol advertised (legacy-formats.md §1.1).
const legacyProtocolVersion = "0.0.9"

// abortError is the exact error Gemini CLI answers a cancelled
// sendUserMessage with (legacy-formats.md §1.4, "Cancel (captured)"): a
// cancelled turn ends with an error, not a null result.
var abortError = json.RawMessage(`{"code":-32603,"message":"Internal error","data":{"details":"This operation was aborted"}}`)

// notGeneratingError is Gemini's answer to cancelSendMessage when no turn is
// running (legacy-formats.md §1.4).
var notGeneratingError = json.RawMessage(`{"code":-32603,"message":"Internal error","data":{"details":"Not currently generating"}}`)

// Agent is the demo's built-in agent: an http.Handler that upgrades each
// request to a WebSocket (one JSON-RPC message per text frame) and speaks the
// legacy Zed ACP 0.0.x protocol on it, shaped like the frames captured from
// Gemini CLI (legacy-formats.md §1): every message is a request with an id,
// each side counts its ids from 0, "void" methods answer null, and there is
// no banner. Each connection is one conversation, as each Gemini process is.
//
// On sendUserMessage the agent runs a script chosen by the prompt's text. A
// prompt mentioning "count" or "slow" streams numbers slowly, so that a
// cancel lands mid-turn; any other prompt streams a thought and some text,
// asks to run `ls -la` (requestToolCallConfirmation), and on approval
// reports the output (updateToolCall) and ends the turn.
//
// The zero value is ready to use. Fields must not be changed once the Agent
// serves. Close ends every conversation.
type Agent struct {
	// Logger receives the agent's logs; nil means none.
	Logger hclog.Logger
	// Tap, when not nil, sees every frame the agent receives (before
	// handling it) and sends (before writing it). It is called from the
	// connections' goroutines, possibly concurrently, and must not keep
	// frame after returning.
	Tap func(dir Direction, frame []byte)
	// Dir is the directory the scripted `ls -la` lists, read with
	// os.ReadDir (nothing is executed). Empty means a fixed sample listing.
	Dir string

	mu     sync.Mutex
	conns  map[*agentConn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ServeHTTP upgrades the request to a WebSocket and holds one conversation
// on it until the peer goes away or the Agent is closed.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		http.Error(w, "demo agent is shutting down", http.StatusServiceUnavailable)
		return
	}
	a.wg.Add(1)
	a.mu.Unlock()
	defer a.wg.Done()

	up := websocket.Upgrader{}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade has already answered the HTTP request.
		a.logger().Warn("websocket upgrade failed", "error", err)
		return
	}
	ws.SetReadLimit(agentReadLimit)

	ctx, cancel := context.WithCancel(context.Background())
	c := &agentConn{
		a:       a,
		ws:      ws,
		ctx:     ctx,
		cancel:  cancel,
		log:     a.logger().With("remote", r.RemoteAddr),
		pending: make(map[int64]chan agentReply),
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		cancel()
		ws.Close()
		return
	}
	if a.conns == nil {
		a.conns = make(map[*agentConn]struct{})
	}
	a.conns[c] = struct{}{}
	a.mu.Unlock()

	c.serve()

	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
}

// Close ends every conversation, refuses new ones, and waits until every
// connection's goroutines have returned. It is safe to call more than once.
func (a *Agent) Close() error {
	a.mu.Lock()
	a.closed = true
	for c := range a.conns {
		c.ws.Close() // unblocks the connection's read loop
	}
	a.mu.Unlock()
	a.wg.Wait()
	return nil
}

func (a *Agent) logger() hclog.Logger {
	if a.Logger == nil {
		return hclog.NewNullLogger()
	}
	return a.Logger
}

func (a *Agent) tap(dir Direction, frame []byte) {
	if a.Tap != nil {
		a.Tap(dir, frame)
	}
}

// agentReply is the bridge's answer to one of the agent's requests.
type agentReply struct {
	result json.RawMessage
	err    json.RawMessage
}

// agentTurn is one running sendUserMessage.
type agentTurn struct {
	id     json.RawMessage // the bridge's request id, copied
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed once the turn's answer is written
}

// agentConn is one conversation. Its read loop (serve) owns the WebSocket's
// read side and answers the bridge's requests; each turn runs on its own
// goroutine and makes requests to the bridge. Writes from both are
// serialised by wmu, which also orders request ids on the wire.
type agentConn struct {
	a      *Agent
	ws     *websocket.Conn
	ctx    context.Context // done when the read loop ends
	cancel context.CancelFunc
	log    hclog.Logger

	wmu    sync.Mutex
	nextID int64 // guarded by wmu; the agent's own ids count from 0

	mu      sync.Mutex
	pending map[int64]chan agentReply // awaited requests by id
	turn    *agentTurn                // the running turn, nil when idle

	turns sync.WaitGroup
}

// serve reads frames until the connection fails, then stops the running
// turn and waits for it.
func (c *agentConn) serve() {
	defer func() {
		c.cancel()
		c.turns.Wait()
		c.ws.Close()
	}()
	for {
		typ, frame, err := c.ws.ReadMessage()
		if err != nil {
			c.log.Debug("connection ended", "error", err)
			return
		}
		if typ != websocket.TextMessage {
			c.log.Warn("ignoring a non-text frame", "type", typ)
			continue
		}
		c.a.tap(ToAgent, frame)
		c.handle(frame)
	}
}

// handle dispatches one frame from the bridge.
func (c *agentConn) handle(frame []byte) {
	env, perr := translate.ParseEnvelope(frame)
	if perr != nil {
		c.log.Warn("unusable frame", "error", perr)
		if env.ID != nil {
			c.send(translate.ErrorFrame(env.ID, perr.JSON()))
		}
		return
	}
	switch {
	case env.IsResponse():
		id, err := strconv.ParseInt(string(env.ID), 10, 64)
		if err != nil {
			c.log.Warn("answer with a non-numeric id", "id", string(env.ID))
			return
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		// Answers to fire-and-forget requests (the stream chunks, which
		// Gemini does not await either, legacy-formats.md §1.5) have no
		// waiter and are dropped here.
		if ch != nil {
			ch <- agentReply{result: clone(env.Result), err: clone(env.Error)}
		}
	case env.IsNotification():
		// The protocol has no notifications (legacy-formats.md §1.2).
		c.log.Warn("ignoring a notification", "method", env.Method)
	case env.IsRequest():
		c.request(env)
	}
}

// request answers one request from the bridge.
func (c *agentConn) request(env translate.Envelope) {
	id := clone(env.ID)
	switch env.Method {
	case "initialize":
		c.send(translate.ResultFrame(id, json.RawMessage(`{"protocolVersion":"`+legacyProtocolVersion+`","isAuthenticated":true}`)))
	case "authenticate":
		c.send(translate.ResultFrame(id, json.RawMessage("null")))
	case "sendUserMessage":
		var p struct {
			Chunks []struct {
				Text *string `json:"text"`
				Path *string `json:"path"`
			} `json:"chunks"`
		}
		if err := json.Unmarshal(env.Params, &p); err != nil {
			c.send(translate.ErrorFrame(id, translate.Errorf(translate.CodeInvalidParams, "%v", err).JSON()))
			return
		}
		var prompt strings.Builder
		for _, ch := range p.Chunks {
			switch {
			case ch.Text != nil:
				prompt.WriteString(*ch.Text)
			case ch.Path != nil:
				prompt.WriteString("@" + *ch.Path)
			}
		}
		c.startTurn(id, prompt.String())
	case "cancelSendMessage":
		c.mu.Lock()
		t := c.turn
		c.turn = nil
		c.mu.Unlock()
		if t == nil {
			c.send(translate.ErrorFrame(id, notGeneratingError))
			return
		}
		// Gemini answers the cancel first and then fails the pending
		// sendUserMessage (legacy-formats.md §1.4).
		c.send(translate.ResultFrame(id, json.RawMessage("null")))
		t.cancel()
	default:
		c.send(translate.ErrorFrame(id, json.RawMessage(`{"code":-32601,"message":"Method not found"}`)))
	}
}

// startTurn runs a new turn for the sendUserMessage id. Like Gemini, a new
// message while a turn runs aborts the old turn (legacy-formats.md §1.4); the
// old turn's error is written before the new turn starts.
func (c *agentConn) startTurn(id json.RawMessage, prompt string) {
	ctx, cancel := context.WithCancel(c.ctx)
	t := &agentTurn{id: id, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	prev := c.turn
	c.turn = t
	c.mu.Unlock()
	if prev != nil {
		prev.cancel()
		<-prev.done
	}
	c.log.Debug("turn started", "prompt", prompt)
	c.turns.Add(1)
	go func() {
		defer c.turns.Done()
		c.runTurn(t, prompt)
	}()
}

// runTurn plays the script for prompt and answers the sendUserMessage: null
// when the turn is over, the captured abort error when it was cancelled.
func (c *agentConn) runTurn(t *agentTurn, prompt string) {
	defer close(t.done)
	var err error
	p := strings.ToLower(prompt)
	if strings.Contains(p, "count") || strings.Contains(p, "slow") {
		err = c.countScript(t.ctx)
	} else {
		err = c.filesScript(t.ctx)
	}
	aborted := t.ctx.Err() != nil
	c.mu.Lock()
	if c.turn == t {
		c.turn = nil
	}
	c.mu.Unlock()
	t.cancel()
	switch {
	case aborted:
		c.send(translate.ErrorFrame(t.id, abortError))
	case err != nil:
		c.log.Warn("turn failed", "error", err)
		details, _ := json.Marshal(map[string]any{"code": translate.CodeInternalError, "message": "Internal error", "data": map[string]string{"details": err.Error()}})
		c.send(translate.ErrorFrame(t.id, details))
	default:
		c.send(translate.ResultFrame(t.id, json.RawMessage("null")))
	}
}

// filesScript streams a thought and some text, asks to run `ls -la`, and on
// approval reports its output, as Gemini does for a shell tool that needs
// approval (legacy-formats.md §1.4).
func (c *agentConn) filesScript(ctx context.Context) error {
	steps := []struct {
		kind, text string
		delay      time.Duration
	}{
		{"thought", "The user wants to see the files here. `ls -la` shows them; running a command needs approval.", 40 * time.Millisecond},
		{"text", "I'll look at ", 50 * time.Millisecond},
		{"text", "the files in ", 30 * time.Millisecond},
		{"text", "this directory ", 60 * time.Millisecond},
		{"text", "with `ls -la`.", 40 * time.Millisecond},
	}
	for _, s := range steps {
		if err := c.chunk(ctx, s.kind, s.text, s.delay); err != nil {
			return err
		}
	}
	res, err := c.call(ctx, "requestToolCallConfirmation", map[string]any{
		"label":   "ls -la",
		"icon":    "terminal",
		"content": nil,
		"confirmation": map[string]any{
			"type":        "execute",
			"rootCommand": "ls",
			"command":     "ls -la",
			"description": "List the files in the current directory",
		},
		"locations": []any{},
	})
	if err != nil {
		return err
	}
	var answer struct {
		ID      *int64 `json:"id"`
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(res, &answer); err != nil || answer.ID == nil {
		return fmt.Errorf("requestToolCallConfirmation answer %s: want {id, outcome}", res)
	}
	switch answer.Outcome {
	case "allow", "alwaysAllow", "alwaysAllowTool", "alwaysAllowMcpServer":
	default:
		// Like Gemini after a rejection: no updateToolCall for that id at
		// all (legacy-formats.md §1.4, "Rejection").
		return c.chunk(ctx, "text", " Understood, I won't run it.", 40*time.Millisecond)
	}
	if err := sleep(ctx, 80*time.Millisecond); err != nil {
		return err
	}
	listing, entries := c.listing()
	if _, err := c.call(ctx, "updateToolCall", map[string]any{
		"toolCallId": *answer.ID,
		"status":     "finished",
		"content":    map[string]any{"type": "markdown", "markdown": listing},
	}); err != nil {
		return err
	}
	if err := c.chunk(ctx, "thought", "The command ran; summarise what it showed.", 40*time.Millisecond); err != nil {
		return err
	}
	summary := []string{" There are ", fmt.Sprintf("%d entries", entries), " in this directory."}
	for _, s := range summary {
		if err := c.chunk(ctx, "text", s, 40*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// countScript counts slowly, one chunk per slowChunkDelay.
func (c *agentConn) countScript(ctx context.Context) error {
	if err := c.chunk(ctx, "text", "Counting:", 30*time.Millisecond); err != nil {
		return err
	}
	for i := 1; i <= slowCount; i++ {
		if err := c.chunk(ctx, "text", " "+strconv.Itoa(i), slowChunkDelay); err != nil {
			return err
		}
	}
	return c.chunk(ctx, "text", ". Done.", 0)
}

// chunk waits delay, then streams one assistant chunk (kind "text" or
// "thought") without waiting for the answer, as Gemini does
// (legacy-formats.md §1.5).
func (c *agentConn) chunk(ctx context.Context, kind, text string, delay time.Duration) error {
	if err := sleep(ctx, delay); err != nil {
		return err
	}
	params, _ := json.Marshal(map[string]any{"chunk": map[string]string{kind: text}})
	_, _, err := c.write("streamAssistantMessageChunk", params, false)
	return err
}

// call makes a request to the bridge and waits for its answer.
func (c *agentConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	id, ch, err := c.write(method, b, true)
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s failed: %s", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// write sends a request with the next id. When await is true it returns the
// channel the answer will be delivered to, registered in c.pending before the
// frame is written so that a quick answer cannot be missed.
func (c *agentConn) write(method string, params json.RawMessage, await bool) (int64, chan agentReply, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.nextID
	c.nextID++
	var ch chan agentReply
	if await {
		ch = make(chan agentReply, 1)
		c.mu.Lock()
		c.pending[id] = ch
		c.mu.Unlock()
	}
	if err := c.writeLocked(translate.RequestFrame(translate.IntID(uint64(id)), method, params)); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return id, nil, err
	}
	return id, ch, nil
}

// send writes one frame (an answer to the bridge).
func (c *agentConn) send(frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.writeLocked(frame); err != nil {
		c.log.Debug("write failed", "error", err)
	}
}

func (c *agentConn) writeLocked(frame []byte) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	c.a.tap(FromAgent, frame)
	c.ws.SetWriteDeadline(time.Now().Add(agentWriteWait))
	return c.ws.WriteMessage(websocket.TextMessage, frame)
}

// listing renders the scripted `ls -la` output as markdown, and counts the
// entries shown. It reads a.Dir when set (names, modes, sizes and times
// only; nothing is executed) and otherwise returns a fixed sample.
func (c *agentConn) listing() (string, int) {
	const maxEntries = 12
	var lines []string
	count := 0
	if c.a.Dir != "" {
		if ents, err := os.ReadDir(c.a.Dir); err == nil {
			sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
			count = len(ents)
			for i, e := range ents {
				if i == maxEntries {
					lines = append(lines, fmt.Sprintf("… and %d more", len(ents)-maxEntries))
					break
				}
				lines = append(lines, lsLine(e))
			}
		} else {
			c.log.Debug("cannot list the directory; using the sample", "dir", c.a.Dir, "error", err)
		}
	}
	if lines == nil {
		lines = []string{
			"-rw-r--r--  1 demo demo   812 Jan  1 12:00 README.md",
			"-rw-r--r--  1 demo demo   130 Jan  1 12:00 go.mod",
			"-rw-r--r--  1 demo demo  2048 Jan  1 12:00 main.go",
		}
		count = len(lines)
	}
	return "```\n" + strings.Join(lines, "\n") + "\n```\n", count
}

// lsLine formats one entry roughly as `ls -l` does.
func lsLine(e fs.DirEntry) string {
	info, err := e.Info()
	if err != nil {
		return e.Name()
	}
	return fmt.Sprintf("%s %8d %s %s", info.Mode().String(), info.Size(), info.ModTime().Format("Jan _2 15:04"), e.Name())
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clone copies a borrowed slice; nil stays nil.
func clone(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

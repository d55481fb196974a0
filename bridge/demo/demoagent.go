package demo

import (
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
	// chunkDelay paces streamed text.
	chunkDelay = 30 * time.Millisecond
	// slowChunkDelay paces the slow script, so that an editor's cancel
	// lands mid-turn.
	slowChunkDelay = 100 * time.Millisecond
	// slowCount is how far the slow script counts.
	slowCount = 20
)

// Agent is the demo's built-in agent: an http.Handler that upgrades each
// request to a WebSocket and speaks Open Interpreter's LMC protocol on it
// (docs/agent-protocols.md#open-interpreter), a JSON format of its own that is
// not JSON-RPC: {"auth":KEY} first (any key will do here), a prompt as the
// user start/message/end triple, streamed assistant messages and code blocks
// with start and end markers, console output, {"role":"server","type":
// "status","content":"complete"} at the end of a turn, and commands ("go",
// "stop") as a user command triple. Each connection is one conversation.
//
// A prompt mentioning "count" or "slow" streams numbers slowly until the
// "stop" command, so that a cancel lands mid-turn. Any other prompt streams
// some text and a shell code block (`ls -la`), then stops for approval, as
// the server does with auto_run off; on "go" it reports the listing and
// ends the turn.
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
	c := &agentConn{a: a, ws: ws, in: make(chan []byte, 64), log: a.logger().With("remote", r.RemoteAddr)}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		ws.Close()
		return
	}
	if a.conns == nil {
		a.conns = make(map[*agentConn]struct{})
	}
	a.conns[c] = struct{}{}
	a.mu.Unlock()

	done := make(chan struct{})
	go c.converse(done)
	c.readLoop()
	<-done
	ws.Close()

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

// agentConn is one conversation. readLoop owns the WebSocket's read side and
// hands frames to converse, which owns the write side.
type agentConn struct {
	a   *Agent
	ws  *websocket.Conn
	in  chan []byte // frames read; closed when the connection ends
	log hclog.Logger
}

// readLoop reads frames until the connection fails.
func (c *agentConn) readLoop() {
	defer close(c.in)
	for {
		typ, frame, err := c.ws.ReadMessage()
		if err != nil {
			c.log.Debug("connection ended", "error", err)
			return
		}
		if typ != websocket.TextMessage {
			continue
		}
		c.a.tap(ToAgent, frame)
		c.in <- frame
	}
}

// converse plays the conversation: the key, then one script per prompt.
func (c *agentConn) converse(done chan<- struct{}) {
	defer close(done)
	defer c.drain()
	first, ok := <-c.in
	if !ok {
		return
	}
	var auth struct {
		Auth *string `json:"auth"`
	}
	if json.Unmarshal(first, &auth) != nil || auth.Auth == nil {
		c.send(`{"auth":false}`)
		return
	}
	c.send(`{"auth":true}`) // the demo has no key to check
	for {
		text, ok := c.triple()
		if !ok {
			return
		}
		if strings.Contains(text, "count") || strings.Contains(text, "slow") {
			c.countScript()
		} else {
			c.filesScript()
		}
		c.send(`{"role":"server","type":"status","content":"complete"}`)
	}
}

// drain discards what is left to read, so that readLoop is never blocked.
func (c *agentConn) drain() {
	for range c.in {
	}
}

// triple reads a user start/content/end triple (a message or a command)
// and returns its content.
func (c *agentConn) triple() (string, bool) {
	first, ok := <-c.in
	if !ok {
		return "", false
	}
	return c.tripleFrom(first)
}

// tripleFrom reads the rest of a triple whose first frame has been read.
func (c *agentConn) tripleFrom(first []byte) (string, bool) {
	content := contentOf(first)
	for range 2 {
		f, ok := <-c.in
		if !ok {
			return "", false
		}
		if s := contentOf(f); s != "" {
			content = s
		}
	}
	return content, true
}

func contentOf(frame []byte) string {
	var m struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(frame, &m)
	return m.Content
}

// filesScript streams some text and a shell block, stops for approval, and
// on "go" reports the listing.
func (c *agentConn) filesScript() {
	c.message("Let me look", " at the files", " in this directory.")
	c.send(`{"role":"assistant","type":"code","format":"shell","start":true}`)
	c.send(`{"role":"assistant","type":"code","format":"shell","content":"ls -la"}`)
	c.send(`{"role":"assistant","type":"code","format":"shell","end":true}`)
	// auto_run is off: the server stops here until told to run the code.
	c.send(`{"role":"server","type":"status","content":"complete"}`)
	cmd, ok := c.triple()
	if !ok {
		return
	}
	if cmd != "go" {
		c.message("Not running it.")
		return
	}
	listing, n := c.listing()
	c.send(`{"role":"computer","type":"console","format":"output","content":` + quote(listing) + `}`)
	c.message("There are ", strconv.Itoa(n), " entries in this directory.")
}

// countScript counts slowly until the "stop" command.
func (c *agentConn) countScript() {
	c.send(`{"role":"assistant","type":"message","start":true}`)
	defer c.send(`{"role":"assistant","type":"message","end":true}`)
	c.send(`{"role":"assistant","type":"message","content":"Counting:"}`)
	t := time.NewTicker(slowChunkDelay)
	defer t.Stop()
	for i := 1; i <= slowCount; i++ {
		select {
		case <-t.C:
			c.send(`{"role":"assistant","type":"message","content":" ` + strconv.Itoa(i) + `"}`)
		case f, ok := <-c.in:
			if !ok {
				return
			}
			// A command triple: its content says what to do ("stop").
			if !strings.Contains(string(f), `"start":true`) {
				continue
			}
			cmd, ok := c.tripleFrom(f)
			if !ok || cmd == "stop" {
				return
			}
		}
	}
}

// message streams an assistant message in parts.
func (c *agentConn) message(parts ...string) {
	c.send(`{"role":"assistant","type":"message","start":true}`)
	for _, p := range parts {
		time.Sleep(chunkDelay)
		c.send(`{"role":"assistant","type":"message","content":` + quote(p) + `}`)
	}
	c.send(`{"role":"assistant","type":"message","end":true}`)
}

// send writes one frame; a failed write only logs (the read side ends the
// conversation).
func (c *agentConn) send(frame string) {
	c.a.tap(FromAgent, []byte(frame))
	c.ws.SetWriteDeadline(time.Now().Add(agentWriteWait))
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.log.Debug("write failed", "error", err)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// listing renders the scripted `ls -la` output, and counts the entries. It
// reads a.Dir when set (names, modes, sizes and times only; nothing is
// executed) and otherwise returns a fixed sample.
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
	return strings.Join(lines, "\n") + "\n", count
}

// lsLine formats one entry roughly as `ls -l` does.
func lsLine(e fs.DirEntry) string {
	info, err := e.Info()
	if err != nil {
		return e.Name()
	}
	return fmt.Sprintf("%s %8d %s %s", info.Mode().String(), info.Size(), info.ModTime().Format("Jan _2 15:04"), e.Name())
}

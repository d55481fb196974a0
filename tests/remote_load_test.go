package tests

// The load test of acp-bridge serve (issue 53, "scale, measured"): 500
// editors at once, half over Streamable HTTP and half over WebSocket, each
// streaming a turn through one serve (the built binary) from one agent.
// What each editor receives is checked byte for byte against what the
// agent sent for its session; serve's memory, descriptors and the latency
// it adds to each update are measured and reported.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"
)

// loadSessions is how many editors TestServeLoad runs at once.
const loadSessions = 500

// loadUpdates is how many updates each editor's turn streams: a few by
// default, to keep the suite quick (fewer under the race detector, which
// makes every update some eight times dearer on both sides);
// ACP_BRIDGE_SERVE_LOAD_UPDATES=200 is the measurement docs/performance.md
// reports.
func loadUpdates(t *testing.T) int {
	v := os.Getenv("ACP_BRIDGE_SERVE_LOAD_UPDATES")
	if v == "" {
		if raceEnabled {
			return 5
		}
		return 10
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("ACP_BRIDGE_SERVE_LOAD_UPDATES=%q: give a number of updates, at least 1", v)
	}
	return n
}

// loadInterval is the pause between two updates of one turn: 50 ms by
// default (500 turns at 20 updates a second each make 10,000 updates a
// second through serve); ACP_BRIDGE_SERVE_LOAD_INTERVAL sets another.
func loadInterval(t *testing.T) time.Duration {
	v := os.Getenv("ACP_BRIDGE_SERVE_LOAD_INTERVAL")
	if v == "" {
		return 50 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("ACP_BRIDGE_SERVE_LOAD_INTERVAL=%q: give a duration such as 50ms", v)
	}
	return d
}

// loadAgent is an ACP v1 agent on WebSocket (one message a frame) whose
// turns stream for the load test: the prompt "load I" streams
// loadUpdates agent_message_chunk updates, each with text unique to
// editor I and its place in the turn, and records the exact bytes it sent
// and when, for the editor to check against.
type loadAgent struct {
	srv      *httptest.Server
	epoch    time.Time
	updates  int
	interval time.Duration
	nextSid  atomic.Int64

	mu   sync.Mutex
	sent map[int]*loadTurn // by editor
}

// loadTurn is what the agent sent for one editor's turn.
type loadTurn struct {
	sid  string // the agent's session id
	msgs [][]byte
	at   []time.Duration // since epoch, just before each write
}

func startLoadAgent(t *testing.T, updates int, interval time.Duration) *loadAgent {
	a := &loadAgent{epoch: time.Now(), updates: updates, interval: interval, sent: map[int]*loadTurn{}}
	up := websocket.Upgrader{ReadBufferSize: 4 << 10, WriteBufferSize: 4 << 10}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		var wmu sync.Mutex
		write := func(msg []byte) error {
			wmu.Lock()
			defer wmu.Unlock()
			return ws.WriteMessage(websocket.TextMessage, msg)
		}
		var turns sync.WaitGroup
		defer turns.Wait()
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			m := gjson.ParseBytes(msg)
			id := m.Get("id")
			var result string
			switch m.Get("method").Str {
			case "initialize":
				result = `{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}`
			case "session/new":
				result = fmt.Sprintf(`{"sessionId":"agent-%d"}`, a.nextSid.Add(1))
			case "session/prompt":
				n, err := strconv.Atoi(strings.TrimPrefix(m.Get("params.prompt.0.text").Str, "load "))
				if err != nil {
					result = ""
					break
				}
				turns.Add(1)
				go func() {
					defer turns.Done()
					a.stream(n, m.Get("params.sessionId").Str, id.Raw, write)
				}()
				continue
			}
			if !id.Exists() || m.Get("method").Str == "" {
				continue // a notification, or an answer to a request of ours
			}
			if result == "" {
				_ = write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"the load test's agent does not serve %s"}}`, id.Raw, m.Get("method").Str)))
				continue
			}
			_ = write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id.Raw, result)))
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *loadAgent) url() string { return "ws" + strings.TrimPrefix(a.srv.URL, "http") }

// stream streams editor n's turn on session sid and answers the prompt id.
func (a *loadAgent) stream(n int, sid, id string, write func([]byte) error) {
	turn := &loadTurn{sid: sid}
	a.mu.Lock()
	a.sent[n] = turn
	a.mu.Unlock()
	rng := rand.New(rand.NewPCG(uint64(n), 53))
	// Turns start together; their updates are spread over the interval.
	time.Sleep(time.Duration(rng.Int64N(int64(a.interval) + 1)))
	pad := make([]byte, 96)
	for seq := range a.updates {
		for i := range pad {
			pad[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(36)]
		}
		msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"editor %d update %d %s"}}}}`, sid, n, seq, pad)
		a.mu.Lock()
		turn.msgs = append(turn.msgs, msg)
		turn.at = append(turn.at, time.Since(a.epoch))
		a.mu.Unlock()
		if write(msg) != nil {
			return
		}
		time.Sleep(a.interval)
	}
	_ = write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, id)))
}

// expected returns what the agent sent as editor n's update seq, with the
// agent's session id replaced by the editor's (serve names its sessions
// itself when it records them), and when it was sent.
func (a *loadAgent) expected(n, seq int, editorSid string) ([]byte, time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	turn := a.sent[n]
	if turn == nil || seq >= len(turn.msgs) {
		return nil, 0, false
	}
	msg := bytes.Replace(turn.msgs[seq], []byte(`"sessionId":"`+turn.sid+`"`), []byte(`"sessionId":"`+editorSid+`"`), 1)
	return msg, turn.at[seq], true
}

// loadEditor is one editor of the load test: a minimal client of the
// remote transport written from its wire rules, that hands every message
// it receives, raw, to msgs.
type loadEditor struct {
	n    int
	ws   bool
	msgs chan []byte
	errs chan error
	// send sends one message, on the stream of session when not "".
	send  func(msg, session string) error
	close func()
}

// dialLoadEditor connects editor n to srv over WebSocket (n even) or
// Streamable HTTP (n odd); over HTTP initialize is answered here.
func dialLoadEditor(ctx context.Context, srv *Served, hc *http.Client, n int) (*loadEditor, error) {
	e := &loadEditor{n: n, ws: n%2 == 0, msgs: make(chan []byte, 64), errs: make(chan error, 4)}
	if e.ws {
		ws, _, err := (&websocket.Dialer{HandshakeTimeout: sdkWait, ReadBufferSize: 4 << 10, WriteBufferSize: 4 << 10}).DialContext(ctx, srv.WSURL(), nil)
		if err != nil {
			return nil, err
		}
		e.send = func(msg, _ string) error { return ws.WriteMessage(websocket.TextMessage, []byte(msg)) }
		e.close = func() { ws.Close() }
		go func() {
			for {
				_, msg, err := ws.ReadMessage()
				if err != nil {
					e.errs <- err
					return
				}
				e.msgs <- msg
			}
		}()
		return e, nil
	}
	post := func(msg, conn, session string) (*http.Response, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.Endpoint, strings.NewReader(msg))
		req.Header.Set("Content-Type", "application/json")
		if conn != "" {
			req.Header.Set("Acp-Connection-Id", conn)
		}
		if session != "" {
			req.Header.Set("Acp-Session-Id", session)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b, err
	}
	resp, body, err := post(initializeBody, "", "")
	if err != nil {
		return nil, err
	}
	conn := resp.Header.Get("Acp-Connection-Id")
	if resp.StatusCode != http.StatusOK || conn == "" {
		return nil, fmt.Errorf("initialize: %s %s", resp.Status, body)
	}
	sctx, stop := context.WithCancel(ctx)
	var streams sync.WaitGroup
	open := func(session string) error {
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.Endpoint, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Acp-Connection-Id", conn)
		if session != "" {
			req.Header.Set("Acp-Session-Id", session)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("GET the stream of session %q: %s", session, resp.Status)
		}
		streams.Add(1)
		go func() {
			defer streams.Done()
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
					e.msgs <- bytes.Clone(data)
				}
			}
			if sctx.Err() == nil {
				e.errs <- fmt.Errorf("the stream of session %q ended: %v", session, sc.Err())
			}
		}()
		return nil
	}
	if err := open(""); err != nil {
		stop()
		return nil, err
	}
	e.msgs <- body
	opened := map[string]bool{}
	e.send = func(msg, session string) error {
		if session != "" && !opened[session] {
			opened[session] = true
			if err := open(session); err != nil {
				return err
			}
		}
		resp, b, err := post(msg, conn, session)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("POST %s: %s %s", msg, resp.Status, b)
		}
		return nil
	}
	e.close = func() {
		req, _ := http.NewRequest(http.MethodDelete, srv.Endpoint, nil)
		req.Header.Set("Acp-Connection-Id", conn)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
		}
		stop()
		streams.Wait()
	}
	return e, nil
}

// next returns the next message e received.
func (e *loadEditor) next(wait time.Duration) ([]byte, error) {
	select {
	case m := <-e.msgs:
		return m, nil
	case err := <-e.errs:
		return nil, err
	case <-time.After(wait):
		return nil, errors.New("timed out waiting for a message")
	}
}

// call sends a request and returns the next message, which must answer it.
func (e *loadEditor) call(id int, msg, session string) (gjson.Result, error) {
	if err := e.send(msg, session); err != nil {
		return gjson.Result{}, err
	}
	b, err := e.next(2 * sdkWait)
	if err != nil {
		return gjson.Result{}, err
	}
	m := gjson.ParseBytes(b)
	if m.Get("id").Int() != int64(id) || !m.Get("result").Exists() {
		return m, fmt.Errorf("want the answer to request %d, got %s", id, truncate(string(b), 300))
	}
	return m, nil
}

// procStatus reads serve's resident memory now and at its peak, and its
// open descriptors.
type procStatus struct {
	rss, hwm, fds int64
	cpu           time.Duration // user and system time so far
}

func readProcStatus(t *testing.T, pid int) procStatus {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var s procStatus
	for _, line := range strings.Split(string(b), "\n") {
		key, rest, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			s.rss = kb << 10
		case "VmHWM":
			s.hwm = kb << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	s.fds = int64(len(fds))
	// utime and stime, fields 14 and 15 of stat, in clock ticks (100 a
	// second on Linux), after the command name in parentheses.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 13 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				k, _ := strconv.ParseInt(f[12], 10, 64)
				s.cpu = time.Duration(u+k) * 10 * time.Millisecond
			}
		}
	}
	return s
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// TestServeLoad: 500 editors at once on one serve, half over Streamable
// HTTP and half over WebSocket, each opening a session and streaming a
// turn (loadUpdates updates, loadInterval apart). Each editor must receive
// exactly its own turn, every update byte for byte as the agent sent it
// (its session id aside), in order, then the answer, and nothing else.
// Once they have all gone, serve's descriptors must be back where they
// were. Reported: serve's memory per open session, the latency each update
// gained between the agent's write and the editor's read (p50, p99, max),
// descriptors, peak RSS and RSS afterwards.
func TestServeLoad(t *testing.T) {
	updates, interval := loadUpdates(t), loadInterval(t)
	agent := startLoadAgent(t, updates, interval)
	srv := StartServe(t, []string{"--max-connections", strconv.Itoa(loadSessions + 12), "--url", agent.url()}, nil)
	pid := srv.cmd.Process.Pid
	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 2 * loadSessions, MaxIdleConnsPerHost: 2 * loadSessions,
		DialContext: (&net.Dialer{}).DialContext, ReadBufferSize: 4 << 10, WriteBufferSize: 4 << 10,
	}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One editor first, so that the idle figure counts what a running
	// serve holds, not the first connection's one-time work.
	warm, err := dialLoadEditor(ctx, srv, hc, 1)
	if err == nil {
		_, err = warm.next(2 * sdkWait)
		warm.close()
	}
	if err != nil {
		t.Fatalf("a first editor: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	idle := readProcStatus(t, pid)

	editors := make([]*loadEditor, loadSessions)
	sids := make([]string, loadSessions)
	var wg sync.WaitGroup
	var failed atomic.Int64
	fail := func(format string, args ...any) {
		if failed.Add(1) <= 20 {
			t.Errorf(format, args...)
		}
	}
	start := time.Now()
	for n := range loadSessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := dialLoadEditor(ctx, srv, hc, n)
			if err != nil {
				fail("editor %d: connecting: %v", n, err)
				return
			}
			editors[n] = e
			if e.ws {
				if err := e.send(initializeBody, ""); err != nil {
					fail("editor %d: %v", n, err)
					return
				}
			}
			if b, err := e.next(2 * sdkWait); err != nil || gjson.GetBytes(b, "id").Int() != 1 {
				fail("editor %d: initialize: %s %v", n, b, err)
				return
			}
			m, err := e.call(2, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, "")
			if err != nil {
				fail("editor %d (websocket %v): session/new: %v", n, e.ws, err)
				return
			}
			sids[n] = m.Get("result.sessionId").Str
		}()
	}
	wg.Wait()
	connected := time.Since(start)
	if failed.Load() > 0 {
		t.Fatalf("%d of %d editors could not open a session", failed.Load(), loadSessions)
	}
	seen := map[string]int{}
	for n, sid := range sids {
		if other, dup := seen[sid]; dup || sid == "" {
			t.Fatalf("editors %d and %d were given session %q", other, n, sid)
		}
		seen[sid] = n
	}
	time.Sleep(200 * time.Millisecond)
	open := readProcStatus(t, pid)

	// Every editor prompts at once; each checks what it gets.
	lat := make([][]time.Duration, loadSessions)
	start = time.Now()
	var peakFds atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for ctx.Err() == nil {
			if s := readProcStatus(t, pid); s.fds > peakFds.Load() {
				peakFds.Store(s.fds)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	for n, e := range editors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid := sids[n]
			if err := e.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"load %d"}]}}`, sid, n), sid); err != nil {
				fail("editor %d: prompt: %v", n, err)
				return
			}
			lat[n] = make([]time.Duration, 0, updates)
			for seq := 0; ; seq++ {
				b, err := e.next(2 * sdkWait)
				got := time.Since(agent.epoch)
				if err != nil {
					fail("editor %d (websocket %v): after %d updates: %v", n, e.ws, seq, err)
					return
				}
				if seq == updates {
					if m := gjson.ParseBytes(b); m.Get("id").Int() != 3 || m.Get("result.stopReason").Str != "end_turn" {
						fail("editor %d (websocket %v): want the prompt's answer after %d updates, got %s", n, e.ws, updates, truncate(string(b), 300))
					}
					return
				}
				want, at, ok := agent.expected(n, seq, sid)
				if !ok || !bytes.Equal(b, want) {
					fail("editor %d (websocket %v), update %d:\n got %s\nwant %s", n, e.ws, seq, truncate(string(b), 400), truncate(string(want), 400))
					return
				}
				lat[n] = append(lat[n], got-at)
			}
		}()
	}
	wg.Wait()
	streamed := time.Since(start)
	during := readProcStatus(t, pid)

	for _, e := range editors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.close()
		}()
	}
	wg.Wait()
	hc.CloseIdleConnections()
	// serve closes what it held for them: wait for its descriptors to come
	// back to the idle figure (the hang guard is generous: a closed HTTP
	// connection's engine ends when its input does).
	after := readProcStatus(t, pid)
	for deadline := time.Now().Add(2 * sdkWait); after.fds > idle.fds+4 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		after = readProcStatus(t, pid)
	}
	cancel()
	<-sampled
	if after.fds > idle.fds+4 {
		t.Errorf("serve holds %d descriptors after every editor has gone, %d before they came", after.fds, idle.fds)
	}

	var all, overWS, overHTTP []time.Duration
	for n, l := range lat {
		all = append(all, l...)
		if n%2 == 0 {
			overWS = append(overWS, l...)
		} else {
			overHTTP = append(overHTTP, l...)
		}
	}
	spread := func(d []time.Duration) string {
		if len(d) == 0 {
			return "none"
		}
		slices.Sort(d)
		at := func(p float64) time.Duration {
			return d[min(len(d)-1, int(float64(len(d))*p))].Round(10 * time.Microsecond)
		}
		return fmt.Sprintf("p50 %v, p99 %v, max %v", at(0.50), at(0.99), at(1))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("serve load: %d sessions (%d WebSocket, %d Streamable HTTP), %d updates each (%d in all) at %v intervals; race detector %v; load average %s",
		loadSessions, (loadSessions+1)/2, loadSessions/2, updates, len(all), interval, raceEnabled, strings.Join(strings.Fields(string(load))[:3], " "))
	t.Logf("serve load: connecting and opening the sessions took %v, streaming %v", connected.Round(time.Millisecond), streamed.Round(time.Millisecond))
	t.Logf("serve load: memory per open session %.0f KiB (RSS %s idle, %s with %d sessions open, peak %s); RSS afterwards %s",
		float64(open.rss-idle.rss)/loadSessions/1024, mib(idle.rss), mib(open.rss), loadSessions, mib(during.hwm), mib(after.rss))
	t.Logf("serve load: added latency per update %s (WebSocket %s; Streamable HTTP %s)", spread(all), spread(overWS), spread(overHTTP))
	if len(all) > 0 {
		t.Logf("serve load: serve's CPU time while streaming %v, %.0f µs per update", (during.cpu - open.cpu).Round(10*time.Millisecond),
			float64((during.cpu-open.cpu).Microseconds())/float64(len(all)))
	}
	t.Logf("serve load: descriptors %d idle, %d with the sessions open, %d at most while streaming, %d afterwards", idle.fds, open.fds, peakFds.Load(), after.fds)
	if len(all) != loadSessions*updates && !t.Failed() {
		t.Errorf("%d updates checked, want %d", len(all), loadSessions*updates)
	}
}

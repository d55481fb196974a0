package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/toolkit/trace"
	"github.com/gorilla/websocket"
	"github.com/urfave/cli/v2"
)

// replayCommand is `acp-bridge replay TRACE [--listen ADDR | --stdio]`.
func replayCommand() *cli.Command {
	return &cli.Command{
		Name:         "replay",
		Usage:        "serve the agent side of a recorded trace, as a fake agent for tests; mismatches go to stderr and make the exit status 1",
		UsageText:    "acp-bridge replay TRACE [--listen 127.0.0.1:PORT [--allow-origin ORIGIN]... | --stdio] [--link N]",
		ArgsUsage:    "TRACE [-- COMMAND [ARGS...]]",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Usage: "serve WebSocket connections on `ADDR`; each connection replays the next recorded agent link"},
			&cli.StringSliceFlag{Name: "allow-origin", Usage: "with --listen, also accept browser connections from `ORIGIN` (https://example.com, or * for any); by default only loopback origins"},
			&cli.BoolFlag{Name: "stdio", Usage: "serve one link on stdin and stdout, one frame a line"},
			&cli.IntFlag{Name: "link", Usage: "replay only agent link `N` (default: whichever the frames match; with --as editor the first)"},
			&cli.StringFlag{Name: "as", Usage: "`SIDE` to play: agent (the default: serve a fake agent) or editor (drive the live agent after -- or at --url and report where it now differs)"},
			&cli.StringFlag{Name: "url", Usage: "with --as editor, the live agent's ws:// `URL`"},
			&cli.StringSliceFlag{Name: "ignore", Usage: "leave the dotted `PATH` out of the comparison (repeatable): what always varies between runs, e.g. params.prompt.*.text (a per-run nonce) or result._meta.pid; * matches every member or element"},
			&cli.StringFlag{Name: "cwd", Usage: "with --as editor, the working `DIR` that replaces the recorded one in every frame (default: a new temporary directory; the recording's is usually gone)"},
			&cli.Float64Flag{Name: "speed", Usage: "play the recorded delays `FACTOR` times as fast (2: twice as fast, 0.5: half; 0: no delays); with --as editor the recorded gaps before each frame sent are played only when given", Value: 1},
			&cli.DurationFlag{Name: "timeout", Usage: "with --as editor, how long (`DURATION`) to wait for each recorded agent frame", Value: 10 * time.Second},
		},
		Action: replayAction,
	}
}

type replayOpts struct {
	trace, listen string
	stdio         bool
	link          int
	as, url       string
	ignore        []string
	allowOrigins  []string
	timeout       time.Duration
	speed         float64
	speedSet      bool     // --speed given: with --as editor, the recorded gaps are played
	cwd           string   // with --as editor, the live working directory
	argv          []string // the live agent's command, after --
}

// replayArgs reads the flags also after TRACE (the flag package stops at
// the first argument, and `replay TRACE --stdio` is the natural order).
func replayArgs(c *cli.Context) (replayOpts, error) {
	o := replayOpts{listen: c.String("listen"), stdio: c.Bool("stdio"), link: c.Int("link"),
		as: c.String("as"), url: c.String("url"), ignore: c.StringSlice("ignore"), allowOrigins: c.StringSlice("allow-origin"),
		timeout: c.Duration("timeout"), speed: c.Float64("speed"), speedSet: c.IsSet("speed"), cwd: c.String("cwd")}
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			o.argv = args[i+1:]
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			if o.trace != "" {
				return o, launch.Usagef("replay takes one TRACE file, not also %q", a)
			}
			o.trace = a
			continue
		}
		if !hasVal && name != "stdio" && i+1 < len(args) {
			val, i = args[i+1], i+1
		}
		switch name {
		case "stdio":
			o.stdio = true
		case "listen":
			o.listen = val
		case "as":
			o.as = val
		case "url":
			o.url = val
		case "ignore":
			o.ignore = append(o.ignore, val)
		case "allow-origin":
			o.allowOrigins = append(o.allowOrigins, val)
		case "speed":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || f < 0 {
				return o, launch.Usagef("--speed: %q is not a factor of 0 or more (2: twice as fast; 0: no delays)", val)
			}
			o.speed, o.speedSet = f, true
		case "cwd":
			o.cwd = val
		case "timeout":
			d, err := time.ParseDuration(val)
			if err != nil {
				return o, launch.Usagef("--timeout: %v", err)
			}
			o.timeout = d
		case "link":
			n, err := strconv.Atoi(val)
			if err != nil {
				return o, launch.Usagef("--link: %q is not a number", val)
			}
			o.link = n
		default:
			return o, launch.Usagef("replay: unknown flag %s", a)
		}
	}
	if o.timeout <= 0 {
		o.timeout = 10 * time.Second
	}
	if o.speed < 0 {
		return o, launch.Usagef("--speed: %v is not a factor of 0 or more", o.speed)
	}
	switch {
	case o.trace == "":
		return o, launch.Usagef("replay needs the TRACE file: acp-bridge replay TRACE --stdio")
	case o.as == "editor":
		if (len(o.argv) > 0) == (o.url != "") {
			return o, launch.Usagef("replay --as editor needs the live agent: -- COMMAND [ARGS...] or --url ws://…")
		}
	case o.as != "" && o.as != "agent":
		return o, launch.Usagef("--as: %q is neither agent nor editor", o.as)
	case len(o.argv) > 0:
		return o, launch.Usagef("replay as the agent takes no command after --; did you mean --as editor?")
	case o.stdio == (o.listen != ""):
		return o, launch.Usagef("replay needs exactly one of --stdio and --listen ADDR")
	}
	return o, nil
}

func replayAction(c *cli.Context) error {
	o, err := replayArgs(c)
	if err != nil {
		return err
	}
	recs, err := trace.ReadFile(o.trace)
	if err != nil {
		return err
	}
	links := trace.Links(recs)
	if len(links) == 0 {
		return fmt.Errorf("%s records no agent link to replay", o.trace)
	}
	if o.as == "editor" {
		link := links[0]
		if o.link != 0 {
			link = o.link
		}
		return replayEditor(c.Context, o, trace.NewEditorReplay(recs, link))
	}
	var only []int
	if o.link != 0 {
		only = []int{o.link}
	}
	newSet := func() *trace.Set {
		s := trace.NewSet(recs, only...)
		s.SetIgnore(o.ignore)
		return s
	}
	var failed atomic.Bool
	if o.stdio {
		out := bufio.NewWriter(os.Stdout)
		send := func(frames [][]byte) error {
			for _, f := range frames {
				out.Write(f)
				out.WriteByte('\n')
			}
			return out.Flush()
		}
		err = replayConn(newSet(), readLine, send, &failed, connOpts{flushAtEnd: true, peer: "stdout", speed: o.speed})
	} else {
		err = replayListen(c.Context, listenOpts{addr: o.listen, allowOrigins: o.allowOrigins, speed: o.speed}, newSet, &failed)
	}
	if err != nil {
		return err
	}
	if failed.Load() {
		return launch.ReportedError{Err: errors.New("the live frames differed from the recording")}
	}
	return nil
}

// stdin is replay's reader of stdin, made on first use: not the 64 KiB
// buffer every start of the binary would allocate.
var stdin = sync.OnceValue(func() *bufio.Reader { return bufio.NewReaderSize(os.Stdin, 64<<10) })

// readLine returns the next non-empty line of stdin.
func readLine() ([]byte, error) {
	for {
		line, err := stdin().ReadBytes('\n')
		if t := strings.TrimSpace(string(line)); t != "" {
			return []byte(t), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// connOpts shape how replayConn serves one link.
type connOpts struct {
	// maxQueued bounds the bytes of replies waiting to be sent; 0 means
	// no bound. Past it the peer is not reading: the link is dropped.
	maxQueued int64
	// flushAtEnd sends every reply already owed when the input ends, at
	// once, instead of dropping those not yet due (stdio: the peer that
	// closed its input may still read, as `printf … | replay` does).
	flushAtEnd bool
	// peer names the other side in log lines.
	peer string
	// speed divides the recorded delays; 0 sends replies at once.
	speed float64
	// hangUp, if not nil, ends the link when a reply cannot be sent, so
	// that reading stops too.
	hangUp func()
}

// errNotReading is replayConn's answer for a peer that lets its replies
// pile up past connOpts.maxQueued.
var errNotReading = errors.New("the peer does not read its replies")

// replayConn drives one replayed link until its input ends. A writer
// goroutine sends the replies in order, each when it is due, so that
// reading goes on while a recorded pause is replayed.
// scaled is a recorded delay played speed times as fast.
func scaled(d time.Duration, speed float64) time.Duration {
	if speed <= 0 {
		return 0
	}
	return time.Duration(float64(d) / speed)
}

func replayConn(rp *trace.Set, read func() ([]byte, error), send func([][]byte) error, failed *atomic.Bool, o connOpts) error {
	if err := send(rp.Opening()); err != nil {
		return err
	}
	type due struct {
		frame []byte
		at    time.Time
	}
	var queued atomic.Int64 // bytes of replies not yet sent
	queue := make(chan due, 1<<16)
	ended := make(chan struct{}) // the input ended
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		var err error
		for d := range queue {
			t := time.NewTimer(time.Until(d.at))
			select {
			case <-ended:
				if !o.flushAtEnd {
					err = errors.New("stopped")
				}
			case <-t.C:
			}
			t.Stop()
			if err == nil {
				if err = send([][]byte{d.frame}); err != nil && o.hangUp != nil {
					fmt.Fprintf(os.Stderr, "acp-bridge replay: %s does not read its replies (%v); disconnecting it\n", o.peer, err)
					o.hangUp()
				}
			}
			queued.Add(-int64(len(d.frame)))
		}
	}()
	var result error
	last := time.Now()
	for {
		frame, err := read()
		if err != nil {
			if n := rp.Remaining(); n > 0 {
				fmt.Fprintf(os.Stderr, "acp-bridge replay: the input ended with %d recorded frames from the bridge not seen\n", n)
			}
			break
		}
		now := time.Now()
		replies, err := rp.Handle(frame)
		var m *trace.Mismatch
		if errors.As(err, &m) {
			failed.Store(true)
			// The details (the recorded frame) go to stderr only: a
			// peer must not learn the recording by sending wrong frames.
			fmt.Fprintf(os.Stderr, "acp-bridge replay: %v\n", m)
			if answer := mismatchAnswer(m); answer != nil {
				replies = []trace.Reply{{Frame: answer}}
			}
		}
		for _, r := range replies {
			// A reply larger than the bound still passes, alone.
			n := queued.Add(int64(len(r.Frame)))
			if o.maxQueued > 0 && (n > o.maxQueued && n > int64(len(r.Frame)) || len(queue) == cap(queue)) {
				fmt.Fprintf(os.Stderr, "acp-bridge replay: %s does not read its replies (%d bytes in %d frames waiting, the limit is %d bytes); disconnecting it\n",
					o.peer, n, len(queue), o.maxQueued)
				result = errNotReading
				break
			}
			// Never before an earlier reply: order is kept.
			at := now.Add(scaled(r.After, o.speed))
			if at.Before(last) {
				at = last
			}
			last = at
			queue <- due{r.Frame, at}
		}
		if result != nil {
			break
		}
	}
	close(ended)
	close(queue)
	if result == nil || o.flushAtEnd {
		<-sent
	}
	return result
}

// mismatchAnswer is the JSON-RPC error for a request that did not match,
// or nil for anything else. It names the frame, never the recorded one:
// that is on stderr.
func mismatchAnswer(m *trace.Mismatch) []byte {
	var r trace.Record
	trace.Classify(&r, m.Actual)
	if r.Kind != trace.KindRequest {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.ID, "error": map[string]any{
		"code":    -32603,
		"message": fmt.Sprintf("replay: %s is not what the recording expected at frame %d; the replay's stderr shows the difference", r.Method, m.Index),
		"data":    map[string]any{"frame": m.Index},
	}})
	return b
}

// Limits of replay --listen, a local server any process (and, through
// the browser, any web page) can reach.
const (
	replayMaxConns    = 32
	replayMaxQueued   = 16 << 20 // bytes of replies waiting for one client
	replayMaxFrame    = 64 << 20 // largest frame read from a client
	replayWriteWithin = 10 * time.Second
)

type listenOpts struct {
	addr string
	// allowOrigins are the Origin header values accepted besides
	// loopback ones (and requests without Origin, which browsers always
	// send); "*" accepts any.
	allowOrigins []string
	// speed is connOpts.speed.
	speed float64
}

// checkOrigin accepts a WebSocket handshake without an Origin (not a
// browser), from a loopback origin, or from one allowed by --allow-origin:
// a web page the user visits must not drive the replay.
func (o listenOpts) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	for _, a := range o.allowOrigins {
		if a == "*" || strings.EqualFold(a, origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// replayListen serves WebSocket connections on addr until ctx ends, each
// replaying whichever recorded link its frames match.
func replayListen(ctx context.Context, o listenOpts, newSet func() *trace.Set, failed *atomic.Bool) error {
	l, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "acp-bridge replay: serving on ws://%s\n", l.Addr())
	up := websocket.Upgrader{CheckOrigin: func(r *http.Request) bool {
		if o.checkOrigin(r) {
			return true
		}
		fmt.Fprintf(os.Stderr, "acp-bridge replay: refused a connection from origin %q: only loopback origins are served; allow it with --allow-origin %s\n",
			r.Header.Get("Origin"), r.Header.Get("Origin"))
		return false
	}}
	slots := make(chan struct{}, replayMaxConns)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			fmt.Fprintf(os.Stderr, "acp-bridge replay: refused a connection from %s: %d already open\n", r.RemoteAddr, replayMaxConns)
			http.Error(w, fmt.Sprintf("replay serves at most %d connections at once", replayMaxConns), http.StatusServiceUnavailable)
			return
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetReadLimit(replayMaxFrame)
		read := func() ([]byte, error) {
			_, b, err := conn.ReadMessage()
			return b, err
		}
		send := func(frames [][]byte) error {
			for _, f := range frames {
				conn.SetWriteDeadline(time.Now().Add(replayWriteWithin))
				if err := conn.WriteMessage(websocket.TextMessage, f); err != nil {
					return err
				}
			}
			return nil
		}
		_ = replayConn(newSet(), read, send, failed, connOpts{maxQueued: replayMaxQueued, speed: o.speed, peer: "the client at " + r.RemoteAddr,
			hangUp: func() { conn.Close() }})
	})}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

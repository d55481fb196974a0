package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/bridge/remote"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

// Flags of the serve command (acp-bridge serve: the agent over the ACP
// remote transport).
const (
	flagListen         = "listen"
	flagPath           = "path"
	flagTokenEnv       = "token-env"
	flagTokenFile      = "token-file"
	flagTLSCert        = "tls-cert"
	flagTLSKey         = "tls-key"
	flagAllowOrigin    = "allow-origin"
	flagMaxConnections = "max-connections"
	flagMaxBuffered    = "max-buffered"
	flagIdleTimeout    = "idle-timeout"
)

// shutdownWait bounds a graceful shutdown: the engines answer what is
// pending within about 3 s (bridge.Bridge.Serve), and their answers need a
// moment to reach the clients.
const shutdownWait = 10 * time.Second

func remoteServeCommand() *cli.Command {
	str := func(name, usage, value string) cli.Flag {
		return &cli.StringFlag{Name: name, Usage: usage, Value: value, EnvVars: envTwin(name)}
	}
	return &cli.Command{
		Name:      "serve",
		Usage:     "serve the agent to remote editors over the ACP remote transport (Streamable HTTP and WebSocket at one endpoint), one bridge per connection",
		UsageText: "acp-bridge serve [--listen HOST:PORT] [--path /acp] [--token-env VAR | --token-file FILE] [--tls-cert FILE --tls-key FILE] [--agent NAME | --url URL | -- COMMAND [ARGS...]]\n\nEach flag may be set in the configuration's serve { … } block instead; a flag given overrides it.",
		ArgsUsage: "[-- COMMAND [ARGS...]]",
		Flags: append(serveFlags(),
			str(flagListen, "listen on `HOST:PORT` (port 0 picks a free one); an address beyond loopback needs --token-env", "127.0.0.1:8443"),
			str(flagPath, "the endpoint's `PATH`", "/acp"),
			str(flagTokenEnv, "require \"Authorization: Bearer TOKEN\", the token read from the environment variable `VAR`", ""),
			str(flagTokenFile, "require \"Authorization: Bearer TOKEN\", the token read from this `FILE` (spaces around it trimmed)", ""),
			str(flagTLSCert, "serve HTTPS and WSS with the certificate chain in this PEM `FILE` (with --tls-key)", ""),
			str(flagTLSKey, "the private key of --tls-cert, a PEM `FILE`", ""),
			&cli.StringSliceFlag{Name: flagAllowOrigin, Usage: "serve requests from web pages of this `ORIGIN` (scheme://host:port; repeatable; default none)", EnvVars: envTwin(flagAllowOrigin)},
			&cli.IntFlag{Name: flagMaxConnections, Usage: "at most `N` connections at once", Value: remote.DefaultMaxConnections, EnvVars: envTwin(flagMaxConnections)},
			str(flagMaxBuffered, "output (`SIZE`) a connection may hold that its client has not read, before its engine waits (default 8MiB)", ""),
			str(flagIdleTimeout, "close an HTTP connection with no open stream and no message for `DURATION`; off never (default 5m)", ""),
		),
		Action: remoteServeAction,
	}
}

func remoteServeAction(c *cli.Context) error {
	r, err := resolveAgent(c)
	if err != nil {
		return err
	}
	f, cfg, s, spec, dialect, newTranslator := r.flags, r.cfg, r.settings, r.spec, r.dialect, r.newTranslator
	shim, err := launch.ResolveShim(cfg, f)
	if err != nil {
		return err
	}
	newTranslator, report := shim.ApplyShim(&spec, dialect, newTranslator)
	if spec.Command != nil {
		if _, err := exec.LookPath(spec.Command.Path); err != nil {
			return fmt.Errorf("agent command: %w", err)
		}
	}
	srv, addr, tlsFiles, err := remoteServer(c, cfg.Serve, s.MaxMessage)
	if err != nil {
		return err
	}
	if c.IsSet(launch.FlagTrace) {
		return launch.Usagef("--%s records one editor's session; serve has many: trace with a bridge on the editor's side (acp-bridge --url … --trace FILE)", launch.FlagTrace)
	}
	secrets := spec.Secrets()
	if srv.Token != "" {
		secrets = append(secrets, srv.Token)
	}
	defer scrubStderr(secrets)()
	logger, closeLog, err := launch.NewScrubbedLogger(s, launch.NewScrubber(secrets...))
	if err != nil {
		return err
	}
	defer closeLog.Close()
	for _, name := range spec.Ignored {
		logger.Warn("flag applies to websocket agents only; ignored", "flag", name)
	}
	srv.Logger = logger.Named("remote")
	retention := &store.Retention{}
	srv.Engine = func(ctx context.Context, id string, in io.Reader, out io.Writer) error {
		log := logger.With("connection", id[:8])
		b := launch.NewBridge(spec, dialect, newTranslator, s, log, versionString())
		sessions, err := setupSessions(c, cfg, spec, b, log, s.MaxMessage, retention)
		if err != nil {
			return err
		}
		defer sessions.Close()
		story := &bridge.StoryLog{Logger: log}
		story.Attach(b)
		shim.Hook(b, report)
		err = b.Serve(ctx, in, out)
		story.End(stopReason(ctx, err))
		return err
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--%s %s: %w", flagListen, addr, err)
	}
	ln = newLimitListener(ln, 4*srv.MaxConnections+16)
	srv.Authenticated = trustSocket
	scheme := "http"
	if tlsFiles[0] != "" {
		scheme = "https"
	}
	path := servePath(c, cfg.Serve)
	endpoint := scheme + "://" + ln.Addr().String() + path
	mux := http.NewServeMux()
	var endpointHandler http.Handler = srv
	if host, _, _ := net.SplitHostPort(addr); isLoopback(host) && srv.Token == "" {
		endpointHandler = loopbackHostOnly(srv, logger)
	}
	mux.Handle(path, endpointHandler)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		remote.RefuseStranger(w, http.StatusNotFound, "no ACP endpoint here; it is at %s", path)
	})
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          logger.Named("http").StandardLogger(nil),
		ConnContext:       socketContext,
	}
	// The RFD asks Streamable HTTP for HTTP/2: over TLS it is negotiated,
	// in clear text a client may speak it with prior knowledge; HTTP/1.1
	// (the SDK's node clients, WebSocket upgrades) stays.
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	served := make(chan error, 1)
	go func() {
		if tlsFiles[0] != "" {
			hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
			served <- hs.ServeTLS(ln, tlsFiles[0], tlsFiles[1])
		} else {
			served <- hs.Serve(ln)
		}
	}()
	logger.Info("listening", "endpoint", endpoint, "agent", spec.Desc, "version", versionString(),
		"token", srv.Token != "", "max_connections", srv.MaxConnections, "procs", runtime.GOMAXPROCS(0))
	select {
	case err := <-served:
		return fmt.Errorf("serving %s: %w", endpoint, err)
	case <-c.Context.Done():
	}
	logger.Info("shutting down: answering what is pending", "endpoint", endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Shutdown(ctx); err != nil {
			logger.Warn("connections still open at the end of the shutdown", "error", err)
		}
	}()
	// Stop accepting while the engines answer; handlers end with them.
	_ = hs.Shutdown(ctx)
	wg.Wait()
	hs.Close()
	if rerr := report.Finish(os.Stderr); rerr != nil {
		logger.Error("could not write the compliance shim report", "error", rerr)
	}
	logger.Info("stopped")
	return nil
}

// remoteServer builds the remote.Server the flags and the configuration's
// serve block (sc, nil when absent) describe, a flag given overriding the
// block (without its engine and logger), the address to listen on and the
// TLS files, refusing an address beyond loopback without a token.
// maxMessage is the resolved max_message (--max-message over the file's),
// which bounds a message on the endpoint as in the engine; 0 = default.
func remoteServer(c *cli.Context, sc *config.Serve, maxMessage int) (*remote.Server, string, [2]string, error) {
	if sc == nil {
		sc = &config.Serve{}
	}
	var tlsFiles [2]string
	addr := c.String(flagListen)
	if !c.IsSet(flagListen) && sc.Listen != "" {
		addr = sc.Listen
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", tlsFiles, launch.Usagef("--%s %q: give HOST:PORT, such as 127.0.0.1:8443 (port 0 picks a free one)", flagListen, addr)
	}
	if path := servePath(c, sc); !strings.HasPrefix(path, "/") {
		return nil, "", tlsFiles, launch.Usagef("--%s %q: the path starts with /, such as /acp", flagPath, path)
	}
	srv := &remote.Server{AllowOrigins: sc.AllowOrigins, MaxConnections: c.Int(flagMaxConnections)}
	if c.IsSet(flagAllowOrigin) {
		srv.AllowOrigins = c.StringSlice(flagAllowOrigin)
	}
	if !c.IsSet(flagMaxConnections) && sc.MaxConnections > 0 {
		srv.MaxConnections = sc.MaxConnections
	}
	if srv.MaxConnections <= 0 {
		return nil, "", tlsFiles, launch.Usagef("--%s must be at least 1", flagMaxConnections)
	}
	if srv.Token, err = serveToken(c, sc); err != nil {
		return nil, "", tlsFiles, err
	}
	if !isLoopback(host) && srv.Token == "" {
		return nil, "", tlsFiles, launch.Usagef("--%s %s listens beyond loopback: anyone who can reach it could run the agent. Require a bearer token with --%s VAR (the token in the environment variable VAR), --%s FILE, or token = env(\"VAR\") in the configuration's serve block; or listen on 127.0.0.1", flagListen, addr, flagTokenEnv, flagTokenFile)
	}
	tlsFiles = [2]string{sc.TLSCert, sc.TLSKey}
	if c.IsSet(flagTLSCert) || c.IsSet(flagTLSKey) {
		// The pair comes from one place: a certificate on the command
		// line with the file's key would be a pair nobody chose.
		tlsFiles = [2]string{c.String(flagTLSCert), c.String(flagTLSKey)}
	}
	if (tlsFiles[0] == "") != (tlsFiles[1] == "") {
		return nil, "", tlsFiles, launch.Usagef("give --%s and --%s together", flagTLSCert, flagTLSKey)
	}
	if tlsFiles[0] != "" {
		if _, err := tls.LoadX509KeyPair(tlsFiles[0], tlsFiles[1]); err != nil {
			return nil, "", tlsFiles, fmt.Errorf("--%s/--%s: %w", flagTLSCert, flagTLSKey, err)
		}
	}
	srv.MaxBuffered = sc.MaxBuffered
	if v := c.String(flagMaxBuffered); c.IsSet(flagMaxBuffered) || v != "" {
		n, err := config.ParseSize(v)
		if err != nil || n <= 0 {
			return nil, "", tlsFiles, launch.Usagef("--%s %q: give a size such as 8MiB", flagMaxBuffered, v)
		}
		srv.MaxBuffered = n
	}
	srv.IdleTimeout = sc.IdleTimeout
	if v := c.String(flagIdleTimeout); c.IsSet(flagIdleTimeout) || v != "" {
		d, err := config.ParseDuration(v, config.ZeroDisables)
		if err != nil {
			return nil, "", tlsFiles, launch.Usagef("--%s: %v", flagIdleTimeout, err)
		}
		srv.IdleTimeout = d
	}
	srv.MaxMessage = int64(maxMessage)
	return srv, addr, tlsFiles, nil
}

// servePath is the endpoint's path: --path, else the serve block's, else
// the flag's default.
func servePath(c *cli.Context, sc *config.Serve) string {
	if !c.IsSet(flagPath) && sc != nil && sc.Path != "" {
		return sc.Path
	}
	return c.String(flagPath)
}

// serveToken is the bearer token: from --token-env or --token-file when
// either is given, else from the serve block (token = env("VAR") or
// token_file); "" for none.
func serveToken(c *cli.Context, sc *config.Serve) (string, error) {
	env, file := c.String(flagTokenEnv), c.String(flagTokenFile)
	if env != "" && file != "" {
		return "", launch.Usagef("give --%s or --%s, not both", flagTokenEnv, flagTokenFile)
	}
	if env != "" {
		token := strings.TrimSpace(os.Getenv(env))
		if token == "" {
			return "", fmt.Errorf("--%s %s: the environment variable %s is empty or not set: export the token in it (for example: export %s=$(openssl rand -hex 32))", flagTokenEnv, env, env, env)
		}
		return token, nil
	}
	what := "--" + flagTokenFile
	if file == "" {
		if sc.TokenFile == "" {
			return string(sc.Token), nil
		}
		file, what = sc.TokenFile, "the serve block's token_file"
	}
	b, err := readTokenFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s %s is empty: write the token in it (for example: openssl rand -hex 32 > %s)", what, file, file)
	}
	return token, nil
}

// readTokenFile reads a token file: a regular file of at most 64 KiB (a
// device or a runaway file is not read whole).
func readTokenFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	case fi.Size() > 64<<10:
		return nil, fmt.Errorf("%s is %d bytes, too long for a token", path, fi.Size())
	}
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// loopbackHostOnly refuses requests whose Host is not a loopback name or
// address: on a loopback listener without a token, a web page that rebinds
// its own domain name to 127.0.0.1 is kept out even where a browser sends
// no Origin (same-origin GETs).
func loopbackHostOnly(next http.Handler, logger hclog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			logger.Warn("refused a request for another host name (DNS rebinding?)", "host", r.Host, "remote", r.RemoteAddr)
			remote.RefuseStranger(w, http.StatusForbidden, "Host %q is not this loopback endpoint: use 127.0.0.1 or localhost, or serve with --token-env", r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopback reports whether host names only the loopback interface.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// limitListener bounds the TCP connections open at once: beyond the ACP
// connection limit, it keeps idle keep-alive connections and slow clients
// from holding unbounded sockets and memory. When all are in use, a new
// socket takes the place of the oldest one that has not authenticated (a
// stranger's, or one still sending its first request's headers): peers
// without the token cannot hold the sockets editors need, however many
// they open or however slowly they send; only a new socket finds none to
// take when every one has authenticated.
type limitListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open map[*limitConn]struct{}
	seq  uint64
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, max: n, open: map[*limitConn]struct{}{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
		c.Close()
	}
}

// admit counts c in, closing the oldest socket that has not authenticated
// to make room; nil when there is none.
func (l *limitListener) admit(c net.Conn) *limitConn {
	l.mu.Lock()
	var evict *limitConn
	if len(l.open) >= l.max {
		for o := range l.open {
			if !o.trusted.Load() && (evict == nil || o.seq < evict.seq) {
				evict = o
			}
		}
		if evict == nil {
			l.mu.Unlock()
			return nil
		}
		delete(l.open, evict)
	}
	l.seq++
	lc := &limitConn{Conn: c, l: l, seq: l.seq}
	l.open[lc] = struct{}{}
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close()
	}
	return lc
}

func (l *limitListener) release(c *limitConn) {
	l.mu.Lock()
	delete(l.open, c)
	l.mu.Unlock()
}

type limitConn struct {
	net.Conn
	l       *limitListener
	seq     uint64 // the order of acceptance
	trusted atomic.Bool
	once    sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// socketKey is the request context key of the limitConn a request came on.
type socketKey struct{}

// socketContext records the limitConn under c (a TLS connection's too) in
// the context of its requests, for trustSocket.
func socketContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitConn); ok {
		ctx = context.WithValue(ctx, socketKey{}, lc)
	}
	return ctx
}

// trustSocket marks the socket r came on as an editor's: it authenticated,
// and no new socket takes its place.
func trustSocket(r *http.Request) {
	if lc, ok := r.Context().Value(socketKey{}).(*limitConn); ok {
		lc.trusted.Store(true)
	}
}

package config

import (
	"math"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Serve is the serve { … } block: the settings of `acp-bridge serve`
// (docs/remote.md), each overridden by its command-line flag. Zero values
// mean "not set". The settings serve shares with the relay (max_message,
// queue_bytes, the log and session settings, the agents) stay top-level.
type Serve struct {
	// Listen is the HOST:PORT to listen on (--listen).
	Listen string
	// Path is the endpoint's path (--path), starting with "/".
	Path string
	// Token is the bearer token every request must carry: token = env("VAR")
	// in the file, never a literal (--token-env).
	Token Secret
	// TokenFile is a file whose content (spaces trimmed) is the token
	// (--token-file), read when serve starts; relative to the file's
	// directory. At most one of Token and TokenFile is set.
	TokenFile string
	// TLSCert and TLSKey are PEM files, both or neither (--tls-cert,
	// --tls-key); relative to the file's directory.
	TLSCert, TLSKey string
	// AllowOrigins are the web origins served besides the endpoint's own
	// (--allow-origin); nil = not set.
	AllowOrigins []string
	// MaxConnections bounds the connections open at once
	// (--max-connections); 0 = not set.
	MaxConnections int
	// MaxBuffered bounds a connection's output its client has not read, in
	// bytes (--max-buffered); 0 = not set.
	MaxBuffered int64
	// IdleTimeout closes an HTTP connection with no stream and no message
	// (--idle-timeout); 0 = not set, negative = never ("off" or "0s").
	IdleTimeout time.Duration
}

type rawServe struct {
	Listen         *hcl.Attribute `hcl:"listen,optional"`
	Path           *hcl.Attribute `hcl:"path,optional"`
	Token          *hcl.Attribute `hcl:"token,optional"`
	TokenFile      *hcl.Attribute `hcl:"token_file,optional"`
	TLSCert        *hcl.Attribute `hcl:"tls_cert,optional"`
	TLSKey         *hcl.Attribute `hcl:"tls_key,optional"`
	AllowOrigins   *hcl.Attribute `hcl:"allow_origins,optional"`
	MaxConnections *hcl.Attribute `hcl:"max_connections,optional"`
	MaxBuffered    *hcl.Attribute `hcl:"max_buffered,optional"`
	IdleTimeout    *hcl.Attribute `hcl:"idle_timeout,optional"`
	Body           hcl.Body       `hcl:",body"`
}

func (e *evaluator) serve(raw *rawServe) *Serve {
	if raw == nil {
		return nil
	}
	s := &Serve{}
	if v, ok := e.str(raw.Listen); ok {
		if _, _, err := net.SplitHostPort(v); err != nil {
			e.errorf(raw.Listen.Expr.Range(), "Invalid listen address",
				"listen is HOST:PORT, such as \"127.0.0.1:8443\" (port 0 picks a free one); got %q.", v)
		}
		s.Listen = v
	}
	if v, ok := e.str(raw.Path); ok {
		if !strings.HasPrefix(v, "/") {
			e.errorf(raw.Path.Expr.Range(), "Invalid path", "path starts with /, such as \"/acp\"; got %q.", v)
		}
		s.Path = v
	}
	if v, fromEnv, ok := e.strMarked(raw.Token); ok {
		switch {
		case !fromEnv:
			// Never echo it: it is meant to be a secret.
			e.errorf(raw.Token.Expr.Range(), "Token written in the file",
				"token is a secret: read it from the environment with token = env(\"VAR\"), or from a file of its own with token_file, rather than writing it in the configuration.")
		case strings.TrimSpace(v) == "":
			e.errorf(raw.Token.Expr.Range(), "Empty token",
				"token is empty: set the environment variable it reads to the token (for example: export VAR=$(openssl rand -hex 32)).")
		}
		s.Token = Secret(strings.TrimSpace(v))
	}
	s.TokenFile, _ = e.path(raw.TokenFile)
	if raw.Token != nil && raw.TokenFile != nil {
		e.errorf(raw.TokenFile.Expr.Range(), "Conflicting token settings", "give token or token_file, not both.")
	}
	s.TLSCert, _ = e.path(raw.TLSCert)
	s.TLSKey, _ = e.path(raw.TLSKey)
	if (raw.TLSCert == nil) != (raw.TLSKey == nil) {
		rng := body(raw).MissingItemRange()
		if raw.TLSCert != nil {
			rng = raw.TLSCert.Range
		} else if raw.TLSKey != nil {
			rng = raw.TLSKey.Range
		}
		e.errorf(rng, "Incomplete TLS settings", "give tls_cert and tls_key together: the certificate chain and its private key, PEM files.")
	}
	if list, _, ok := e.strList(raw.AllowOrigins); ok {
		s.AllowOrigins = list
		if s.AllowOrigins == nil {
			s.AllowOrigins = []string{}
		}
	}
	if v, _, ok := e.value(raw.MaxConnections, cty.Number); ok {
		n, acc := v.AsBigFloat().Int64()
		if acc != 0 || n < 1 || n > math.MaxInt32 {
			e.errorf(raw.MaxConnections.Expr.Range(), "Invalid max_connections", "max_connections is a whole number of connections, at least 1.")
		} else {
			s.MaxConnections = int(n)
		}
	}
	if n, ok := e.size(raw.MaxBuffered, 1, 1<<40); ok {
		s.MaxBuffered = n
	}
	s.IdleTimeout, _ = e.duration(raw.IdleTimeout, ZeroDisables)
	return s
}

// body is raw's body, or an empty one.
func body(raw *rawServe) hcl.Body {
	if raw.Body != nil {
		return raw.Body
	}
	return hcl.EmptyBody()
}

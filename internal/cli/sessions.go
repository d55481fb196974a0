package cli

import (
	"io"
	"os"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

// Durable-session flags (see docs/sessions.md).
const (
	flagStateDir    = "state-dir"
	flagNoSessions  = "no-sessions"
	flagSessionIdle = "session-idle"
	flagListAll     = "list-all-sessions"
)

// sessionFlagSpecs are the session store's flags, listed after the relay's
// in serveFlags.
var sessionFlagSpecs = []flagSpec{
	{name: flagStateDir, usage: "keep session transcripts in `DIR` (default $XDG_STATE_HOME/acp-bridge or ~/.local/state/acp-bridge)"},
	{name: flagNoSessions, usage: "record no sessions: no session/list, load, resume or agent switching by the bridge", kind: kindSwitch},
	{name: flagListAll, usage: "session/list lists every recorded session, not only those of the agent being served", kind: kindSwitch},
	{name: flagSessionIdle, usage: "close a session's agent after `DURATION` without a turn; it re-attaches on the next prompt (default off)"},
}

// setupSessions turns on durable sessions for b unless they are off. A
// state dir that cannot be opened is logged and the bridge serves without
// them. The returned function closes the store once Serve has returned.
// retention is shared by the stores of one serve (one per connection), so
// that a new connection makes no retention pass of its own; nil on stdio.
func setupSessions(c *cli.Context, cfg *config.Config, spec launch.Agent, b *bridge.Bridge, logger hclog.Logger, maxMessage int, retention *store.Retention) (io.Closer, error) {
	sc := cfg.Sessions
	if c.Bool(flagNoSessions) || sc.Off {
		return nopCloser{}, nil
	}
	idle := sc.Idle
	if c.IsSet(flagSessionIdle) {
		d, err := config.ParseDuration(c.String(flagSessionIdle), config.ZeroDisables)
		if err != nil {
			return nil, launch.Usagef("--%s: %v", flagSessionIdle, err)
		}
		idle = d
	}
	dir := sc.StateDir
	if c.IsSet(flagStateDir) {
		dir = c.String(flagStateDir)
	}
	if dir == "" {
		dir = store.DefaultDir()
	}
	st, err := store.Open(store.Options{Dir: dir, MaxAge: sc.MaxAge, MaxSessions: sc.MaxSessions,
		MaxSessionBytes: sc.MaxBytes, Retention: retention, Logger: logger.Named("sessions")})
	if err != nil {
		logger.Warn("durable sessions are off", "error", err)
		return nopCloser{}, nil
	}
	d := &bridge.Durable{Store: st, NoPreamble: sc.NoPreamble, ListAll: sc.ListAll || c.Bool(flagListAll)}
	if idle > 0 {
		d.IdleTimeout = idle
	}
	if spec.Name != "" && len(cfg.Agents) > 1 {
		for _, a := range cfg.Agents {
			if a.Name == spec.Name {
				d.Agents = append(d.Agents, bridge.Binding{Dialect: b.Dialect, NewTranslator: b.NewTranslator, Dial: b.Dial, Name: a.Name})
				continue
			}
			other, err := launch.ResolveAgent(cfg, launch.Flags{Agent: a.Name, Set: map[string]bool{}}, os.LookupEnv)
			if err == nil {
				dialect, newTranslator, cerr := launch.Configure(other, cfg.Files, os.Stderr)
				if err = cerr; err == nil {
					d.Agents = append(d.Agents, bridge.Binding{Dialect: dialect, NewTranslator: launch.Negotiate(other, dialect, newTranslator),
						Dial: other.Dialer(logger, maxMessage), Name: a.Name})
				}
			}
			if err != nil {
				logger.Warn("agent not offered for switching", "agent", a.Name, "error", err)
			}
		}
	}
	b.Sessions = d
	logger.Debug("durable sessions on", "state_dir", dir, "idle", time.Duration(d.IdleTimeout), "agents", len(d.Agents))
	return st, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

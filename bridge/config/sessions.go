package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Sessions are the durable-session settings: the top-level attributes
// sessions, state_dir, session_idle, history_preamble, session_max_age,
// max_sessions and session_max_bytes.
type Sessions struct {
	// Off is true when the file says sessions = false.
	Off bool
	// StateDir is where transcripts go; "" = not set (the default).
	StateDir string
	// Idle closes idle backend sessions after that long; 0 = not set,
	// negative = never ("0s" or "off").
	Idle time.Duration
	// NoPreamble is true when the file says history_preamble = false.
	NoPreamble bool
	// ListAll is true when the file says list_all_sessions = true.
	ListAll bool
	// MaxAge, MaxSessions, MaxBytes bound the state dir; 0 = not set.
	MaxAge      time.Duration
	MaxSessions int
	MaxBytes    int64
}

func (e *evaluator) sessions(raw *rawRoot) Sessions {
	var s Sessions
	if v, ok := e.boolean(raw.SessionsOn); ok {
		s.Off = !v
	}
	if v, ok := e.boolean(raw.ListAllSessions); ok {
		s.ListAll = v
	}
	if v, ok := e.boolean(raw.HistoryPreamble); ok {
		s.NoPreamble = !v
	}
	s.StateDir, _ = e.path(raw.StateDir)
	s.Idle, _ = e.duration(raw.SessionIdle, ZeroDisables)
	s.MaxAge, _ = e.duration(raw.SessionMaxAge, ZeroDisables)
	if v, _, ok := e.value(raw.MaxSessions, cty.Number); ok {
		n, _ := v.AsBigFloat().Int64()
		if n < 1 {
			e.errorf(raw.MaxSessions.Expr.Range(), "Invalid max_sessions", "max_sessions must be at least 1.")
		}
		s.MaxSessions = int(n)
	}
	if n, ok := e.size(raw.SessionMaxBytes, 64<<10, 1<<40); ok {
		s.MaxBytes = n
	}
	return s
}

func (e *evaluator) boolean(attr *hcl.Attribute) (bool, bool) {
	v, _, ok := e.value(attr, cty.Bool)
	if !ok {
		return false, false
	}
	return v.True(), true
}

// Package early starts the child agent of the command line editors use
// most, `acp-bridge -- COMMAND [ARGS...]`, as the program starts, before
// the rest of it has initialized; the agent command's process start
// (legacy.Command.Start) takes that process over when it is the one it
// would have started. Package main imports it first.
//
// Why: an editor waits from spawning the bridge to the answer to its
// initialize, which the agent gives. Before the bridge can start the
// agent, the Go runtime and the packages of a 23 MB binary initialize
// (about 20 ms of a 2-CPU VM, a hand-written relay's 10), then the command
// line, the configuration and the session store; the agent's own start-up
// (as long again) came after all that. Started here, it starts up while
// the bridge does, as a hand-written relay's agent would.
//
// The process must be the one the bridge would have started: an agent
// has side effects (it may log in, or write files). So only the exact
// form above starts one, with stdin a pipe or a socket (an editor's, see
// package procs), no ACP_BRIDGE_ variable in the environment (their flags
// could name another agent), and on Unix. Without flags, the configuration
// does not change an ad-hoc command, its dialect (acp), its environment or
// its directory: the bridge starts that command with the same path,
// arguments, environment and process group, and Take checks that it does.
// The one exception is a bridge that stops before it serves (a
// configuration file it cannot read): Discard then stops the agent, as
// the bridge's exit would have, through its stdin, anyway.
//
// This package imports no package that package os does not, but procs,
// so that it initializes as early as Go's order allows (a package's
// imports first, then by import path): importing os/exec or strings put
// it after forty other packages' initialization, 6 ms later.
package early

import (
	"os"
	"slices"
	"sync"
)

// Process is an agent started early: the process, the bridge's ends of
// its pipes, and what it was started as.
type Process struct {
	Proc                  *os.Process
	Stdin, Stdout, Stderr *os.File

	path      string
	args, env []string
}

var (
	mu      sync.Mutex
	started *Process
)

// command returns the agent command of args when the bridge would start it
// as it is: args is exactly acp-bridge -- COMMAND [ARGS...], and env names
// no ACP_BRIDGE_ variable. An env that is not plain KEY=VALUE entries with
// distinct keys starts nothing either: os/exec drops all but the last of a
// repeated key, where the child would see the first, and the agent must
// see the environment the bridge would have given it.
func command(args, env []string) ([]string, bool) {
	if len(args) < 3 || args[1] != "--" || args[2] == "" {
		return nil, false
	}
	keys := make(map[string]bool, len(env))
	for _, kv := range env {
		key, ok := envKey(kv)
		if !ok || keys[key] || hasPrefix(kv, "ACP_BRIDGE_") {
			return nil, false
		}
		keys[key] = true
	}
	return args[2:], true
}

// envKey returns the key of a KEY=VALUE entry, and false for an entry
// with no key or no "=".
func envKey(kv string) (string, bool) {
	for i := range len(kv) {
		if kv[i] == '=' {
			return kv[:i], i > 0
		}
	}
	return "", false
}

// Take returns the agent started early if it was started as path with
// args (argv, its name first) and env, in the bridge's directory (dir
// empty) and a process group of its own (ownGroup), and nil otherwise;
// only the first caller gets it.
func Take(path string, args, env []string, dir string, ownGroup bool) *Process {
	mu.Lock()
	defer mu.Unlock()
	p := started
	if p == nil || path != p.path || !slices.Equal(args, p.args) || !slices.Equal(env, p.env) || dir != "" || !ownGroup {
		return nil
	}
	started = nil
	return p
}

// hasPrefix is strings.HasPrefix (see the package comment for why not).
func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

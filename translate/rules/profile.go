package rules

import (
	"path"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// envelope is how requests and replies are framed on the agent hop.
type envelope int

const (
	envNone        envelope = iota // plain JSON frames; replies matched by rules
	envJSONRPC                     // JSON-RPC 2.0; replies matched by id
	envJSONRPCLite                 // the same without the "jsonrpc" member
)

// Profile is a compiled rule profile: a dialect described in HCL.
type Profile struct {
	// Name is what --dialect selects.
	Name string
	// Summary is the one-line description for `acp-bridge dialects`.
	Summary string
	// PerSession: the agent holds one conversation per connection.
	PerSession bool
	// NoHistory: history_preamble = false, the agent's protocol has no
	// chat history (commands, jobs): a new agent session for an existing
	// transcript is not primed with it.
	NoHistory bool
	// Source is the profile's HCL text when it came from a file (empty for
	// a block decoded from a configuration file).
	Source []byte
	// Env looks up the environment variables the profile's env() calls
	// read; it is called when the dialect is configured, never while
	// translating. nil means every variable is unset.
	Env func(string) (string, bool)

	envelope  envelope
	route     []string
	connect   *connectRule
	heartbeat *heartbeatRule
	silence   time.Duration
	silenceTo string
	// quiet is how long a turn may go without a frame any rule matched
	// before the engine is told (a typo in a match hangs a turn); giveUp,
	// when set, is how long before the turn is failed.
	quiet, giveUp time.Duration
	// turnKey, when set, names the turn a frame belongs to: the value at
	// its frame path equals the value at its sent path of the frame the
	// turn's prompt was sent as.
	turnKey  *turnKey
	cancel   *cancelRule
	errors   []*errorRule
	requests map[string]*requestRule
	events   []*rule
	// envNames maps each env() variable to whether it is required.
	envNames map[string]bool
	declared hcl.Range
}

type connectRule struct {
	send          []node
	expect        *match
	reject        *match
	rejectMessage node
}

type heartbeatRule struct {
	every time.Duration
	send  []node
	reply *match
}

type cancelRule struct {
	send []node
	// ack, when set, is how the agent acknowledges a stop; grace is how
	// long it has to before the bridge reports the stop unacknowledged,
	// zero for the engine's cancel grace (translate.Msg.Grace).
	ack   *match
	grace time.Duration
}

// turnKey is turn { key }: the path where the agent's frames name their
// turn, and what a turn's own value is: the value at sent in the frame its
// prompt was sent as, or, when kept is set, the value an event keeps for
// the turn under that name (an id the agent assigns).
type turnKey struct {
	frame, sent, kept string
}

type errorRule struct {
	match   *match
	message node
	code    node
}

type requestRule struct {
	method      string // the ACP method
	agentMethod string // JSON-RPC envelopes: the agent's method
	params      node
	send        []node
	notify      bool
	reply       *rule
}

// rule is an event rule or a request's reply rule.
type rule struct {
	name         string
	match        *match
	correlate    string
	keep         []keepItem
	result       node
	send         []node
	updates      []update
	finalMessage node
	// endTurn, when set, ends the turn with the stop reason it evaluates
	// to: a constant checked at load, or an expression over the frame
	// whose value is checked when it ends a turn.
	endTurn    node
	fail       node
	tool       *toolRule
	permission *permissionRule
	// keepalive: the event's frames (pings) say nothing of a turn, so they
	// never count toward the turn's quiet and give_up.
	keepalive bool
}

type keepItem struct {
	name, path string
}

// update is one session/update a rule emits: a shorthand chunk (kind set,
// n the text) or a whole update object (kind "").
type update struct {
	kind string
	n    node
}

type toolRule struct {
	open, close, quiet                              bool
	key, name, title, kind, input, rawInput, output node
	rawOutput, status                               node
}

type permissionRule struct {
	title          node
	options        node
	allow          []node
	reject         []node
	cancelled      []node
	rejectEndsTurn bool
	// reportWait is how long a refusal that ends the turn waits for the
	// agent's report of the refused call before it answers the prompt
	// (reject_report_wait; 0: it answers at once).
	reportWait time.Duration
}

// Parse compiles a profile file. The dialect's name is the file's base name
// without its extension; filename also names the source in diagnostics.
func Parse(filename string, src []byte) (*Profile, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	name := strings.TrimSuffix(path.Base(filename), path.Ext(filename))
	p, more := Decode(name, f.Body)
	diags = append(diags, more...)
	if p != nil {
		p.Source = src
	}
	return p, diags
}

// Decode compiles a profile from an HCL body: a file's, or the body of a
// dialect "name" { … } block in a configuration file. Every problem comes
// back as a diagnostic with the source range it is about.
func Decode(name string, body hcl.Body) (*Profile, hcl.Diagnostics) {
	var raw rawProfile
	diags := hcldecode.DecodeBody(body, nil, &raw)
	if diags.HasErrors() {
		return nil, diags
	}
	c := &compiler{kept: map[string]hcl.Range{}, turnKept: map[string]hcl.Range{}}
	p := &Profile{Name: name, requests: map[string]*requestRule{}, declared: body.MissingItemRange()}
	d := c.profile(p, &raw)
	diags = append(diags, d...)
	for _, u := range c.keptUses {
		if _, ok := c.kept[u.name]; !ok {
			diags = append(diags, diag(u.rng, "Unknown session value",
				"session.%s is not kept by any reply; a reply keeps values with keep = { %s = \"path\" }.", u.name, u.name))
		}
	}
	for _, u := range c.turnKeptUses {
		if _, ok := c.turnKept[u.name]; !ok {
			diags = append(diags, diag(u.rng, "Unknown turn value",
				"turn.%s is not kept by any event; an event keeps a value of its turn with keep = { %s = \"path\" }, and turn.sent.PATH reads the prompt's frame.", u.name, u.name))
		}
	}
	if p.route != nil {
		if _, ok := c.kept["agent_session"]; !ok {
			diags = append(diags, diag(raw.Route.Range, "Route without agent_session",
				"route compares the paths' values with session.agent_session, but no reply keeps agent_session."))
		}
	}
	p.envNames = c.envNames
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

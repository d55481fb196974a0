package rules

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/translate"
)

// Note names (translate.Out Note): what the engine counts and logs.
const (
	noteUnmatched = "unmatched-frames"
	noteDropped   = "drained-turn-updates"
	noteAgentCall = "unsupported-agent-requests"
	// noteCancelRefused: the agent answered a forwarded cancel with an
	// error. The engine logs it at WARN: the agent may still be running the
	// turn the editor was told is over.
	noteCancelRefused = "cancel-refused"
	// noteTurnQuiet: no frame of a turn matched a rule for Profile.quiet.
	// The engine logs it at WARN: a typo in a match hangs a turn silently.
	noteTurnQuiet = "turn-quiet"
	// noteCancelUnacked: a forwarded stop was not acknowledged (the
	// cancel block's ack) within its grace. The engine logs it at WARN.
	noteCancelUnacked = "cancel-unacknowledged"
	// noteCancelAcked: the agent acknowledged a forwarded stop.
	noteCancelAcked = "cancel-acknowledged"
	// noteCancelIgnored: a turn whose stop was forwarded ended through an
	// end rule saying the agent finished it. The engine logs it at WARN:
	// the editor's stop did not stop the agent.
	noteCancelIgnored = "cancel-ignored"
	// noteConnectExpect says which frame the connect block waits for, when
	// it starts waiting: a person told only that initialize timed out
	// learns what never came (acp-bridge doctor reports it).
	noteConnectExpect = "connect-expect"
	// noteConnectRejected: the connect block's reject matched, with the
	// frame and the environment variables the profile reads (most often
	// the credentials it sent). The engine logs it at WARN; acp-bridge
	// doctor reports it.
	noteConnectRejected = "connect-rejected"
	// noteInvalidStop: an end_turn expression gave a value that is no
	// stop reason; the turn ended end_turn. The engine logs it at WARN.
	noteInvalidStop = "invalid-stop-reason"
)

type connState int

const (
	connOpen      connState = iota // no connect block, or its work is done
	connWaitUp                     // waiting for LinkUp
	connWaitFrame                  // connect frames sent, waiting for expect
	connRejected                   // the agent refused the connection
)

// translator is one agent link driven by a profile.
type translator struct {
	// cur is the envelope of the JSON-RPC frame fromAgent is translating,
	// nil otherwise: lookups under params start from its params.
	cur     *translate.Envelope
	env     translate.Envelope // the storage cur points to
	p       *Profile
	envVars map[string]string
	now     time.Time
	// rule names the rule that handled the last agent frame (an event's
	// name, "reply METHOD", "error", "connect.expect"…), for traces.
	rule string
	// grace is the engine's cancel grace, as its last cancel said
	// (translate.Msg.Grace): how long the agent has to acknowledge a stop
	// when the cancel block does not say.
	grace time.Duration

	conn      connState
	rejectErr json.RawMessage
	held      []translate.Msg

	nextID   uint64
	waiting  []*exchange
	byID     map[string]*exchange
	sessions []*session
	minted   int

	nextCall translate.Ref
	perms    map[translate.Ref]*pendingPermission
	stale    map[translate.Ref]bool

	// ended are the keys of the last turns that ended, when the turn key
	// is a value the agent assigns (turn { key = { turn = NAME } }): a
	// frame naming one is a late frame of that turn, not the first frame
	// of a turn whose id is not kept yet.
	ended []string

	nextBeat time.Time
	armed    time.Time
	// st is the match state of the frame being handled (reused).
	st state
	// keyed says the frame being handled named its turn by the turn key:
	// it belongs to that turn, whatever rule it matches.
	keyed bool
}

// exchange is one request sent to the agent whose reply is awaited.
type exchange struct {
	req    *requestRule
	method string
	ref    translate.Ref // 0 once answered or abandoned
	id     uint64
	sent   []byte
	sess   *session
	turn   *turn
	// session/new
	cwd       string
	sessionID string
}

type session struct {
	id   string
	cwd  string
	kept map[string][]byte
	// agentSession is the text of kept["agent_session"], for routing.
	agentSession string
	turns        []*turn // oldest first; only the last can be live
	tools        []*tool
	seq          int
	// toolIDs are the toolCallIds the session has used: an agent that
	// numbers its tool calls per turn would otherwise give two turns the
	// same ids, which editors merge.
	toolIDs map[string]bool
	// lateRefused are the last calls the editor refused that the agent had
	// not closed when their turn ended: a report of one after that is
	// noted as late, not dropped without a word.
	lateRefused []*tool
	// draining: the last turn ended cancelled (or was answered by the
	// engine), and the agent may not have stopped with it: updates of no
	// turn are dropped until the next prompt, as the engine does for the
	// turns it answers itself.
	draining bool
}

type turn struct {
	ref       translate.Ref
	sess      *session
	ex        *exchange
	cancelled bool // session/cancel was forwarded: the end is answered "cancelled"
	dropped   bool // already answered: frames until its end are dropped
	// refused: the agent answered the cancel with an error, so it may never
	// end the turn; the next prompt of the session forgets it.
	refused  bool
	streamed bool // an agent_message_chunk was sent
	deadline time.Time
	perm     translate.Ref
	// quietAt and giveUpAt are when the turn has gone Profile.quiet and
	// Profile.giveUp without a frame a rule matched (zero: not armed);
	// unmatched is the last frame no rule matched meanwhile, for the
	// warning.
	quietAt, giveUpAt time.Time
	unmatched         []byte
	// key is the turn's value of the profile's turn key (turn { key }),
	// read from the frame its prompt was sent as; keyed says it has one.
	key   string
	keyed bool
	// ackBy is when a forwarded stop must have been acknowledged (the
	// cancel block's ack and grace); zero when none is awaited. ackGrace
	// is the grace it was given.
	ackBy    time.Time
	ackGrace time.Duration
	// stopKey is the value of the turn key (its sent path) in the stop
	// frame forwarded for the turn, when it has one: an error frame naming
	// it is the agent refusing that stop.
	stopKey   string
	stopKeyed bool
	// kept are the values events kept for the turn (turn.NAME).
	kept map[string][]byte
	// reportBy: the editor refused a permission whose rule ends the turn,
	// and the turn's end waits until then for the agent's report of the
	// refused call (each report moves it reportWait on); the agent's own
	// end of the turn comes first if it comes. Zero when not waiting.
	reportBy   time.Time
	reportWait time.Duration
}

type tool struct {
	id, key, name, title, kind string
	input, output              strings.Builder
	rawInput                   []byte
	announced                  bool
	// rejected: the editor refused the permission the tool asked for, and
	// it was reported failed. It is no longer open (no permission or
	// $tool state refers to it), but the agent's own report of it (its
	// output, its status) still finds it by key or name, until the agent
	// closes it or the turn ends.
	rejected bool
}

type pendingPermission struct {
	rule    *permissionRule
	turn    *turn
	tool    *tool
	frame   []byte
	options map[string]string // optionId → kind
}

func newTranslator(p *Profile, envVars map[string]string) *translator {
	t := &translator{p: p, envVars: envVars, grace: defaultCancelGrace, byID: map[string]*exchange{},
		perms: map[translate.Ref]*pendingPermission{}, stale: map[translate.Ref]bool{}}
	if p.connect != nil {
		t.conn = connWaitUp
	}
	return t
}

var _ translate.AgentClock = (*translator)(nil)

// The HCL schema: the raw blocks and attributes a profile is decoded
// into before it is compiled, and the methods and stop reasons it may
// name.

package rules

import (
	"github.com/hashicorp/hcl/v2"
)

type rawProfile struct {
	Summary    *hcl.Attribute `hcl:"summary,optional"`
	PerSession *hcl.Attribute `hcl:"per_session,optional"`
	// HistoryPreamble: false when the agent's protocol has no chat history.
	HistoryPreamble *hcl.Attribute `hcl:"history_preamble,optional"`
	Envelope        *hcl.Attribute `hcl:"envelope,optional"`
	Route           *hcl.Attribute `hcl:"route,optional"`
	Connect         *rawConnect    `hcl:"connect,block"`
	Heartbeat       *rawHeartbeat  `hcl:"heartbeat,block"`
	Turn            *rawTurn       `hcl:"turn,block"`
	Cancel          *rawCancel     `hcl:"cancel,block"`
	Errors          []*rawError    `hcl:"error,block"`
	Requests        []*rawRequest  `hcl:"request,block"`
	Events          []*rawEvent    `hcl:"event,block"`
}

type rawConnect struct {
	Send          *hcl.Attribute `hcl:"send,optional"`
	Expect        *hcl.Attribute `hcl:"expect,optional"`
	Reject        *hcl.Attribute `hcl:"reject,optional"`
	RejectMessage *hcl.Attribute `hcl:"reject_message,optional"`
}

type rawHeartbeat struct {
	Every *hcl.Attribute `hcl:"every"`
	Send  *hcl.Attribute `hcl:"send"`
	Reply *hcl.Attribute `hcl:"reply,optional"`
}

type rawTurn struct {
	Key     *hcl.Attribute `hcl:"key,optional"`
	Silence *hcl.Attribute `hcl:"silence,optional"`
	Stop    *hcl.Attribute `hcl:"stop,optional"`
	Quiet   *hcl.Attribute `hcl:"quiet,optional"`
	GiveUp  *hcl.Attribute `hcl:"give_up,optional"`
}

type rawCancel struct {
	Send  *hcl.Attribute `hcl:"send,optional"`
	Ack   *hcl.Attribute `hcl:"ack,optional"`
	Grace *hcl.Attribute `hcl:"grace,optional"`
}

type rawError struct {
	Match   *hcl.Attribute `hcl:"match"`
	Message *hcl.Attribute `hcl:"message"`
	Code    *hcl.Attribute `hcl:"code,optional"`
}

type rawRequest struct {
	Method      string         `hcl:"method,label"`
	AgentMethod *hcl.Attribute `hcl:"method,optional"`
	Params      *hcl.Attribute `hcl:"params,optional"`
	Send        *hcl.Attribute `hcl:"send,optional"`
	Notify      *hcl.Attribute `hcl:"notify,optional"`
	Reply       *rawReply      `hcl:"reply,block"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

type rawReply struct {
	Rest     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawEvent struct {
	Name     string    `hcl:"name,label"`
	Rest     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

type rawRule struct {
	Match        *hcl.Attribute `hcl:"match,optional"`
	Correlate    *hcl.Attribute `hcl:"correlate,optional"`
	Keep         *hcl.Attribute `hcl:"keep,optional"`
	Result       *hcl.Attribute `hcl:"result,optional"`
	Send         *hcl.Attribute `hcl:"send,optional"`
	Message      *hcl.Attribute `hcl:"message,optional"`
	Thought      *hcl.Attribute `hcl:"thought,optional"`
	UserMessage  *hcl.Attribute `hcl:"user_message,optional"`
	Plan         *hcl.Attribute `hcl:"plan,optional"`
	Update       *hcl.Attribute `hcl:"update,optional"`
	FinalMessage *hcl.Attribute `hcl:"final_message,optional"`
	EndTurn      *hcl.Attribute `hcl:"end_turn,optional"`
	Fail         *hcl.Attribute `hcl:"fail,optional"`
	Keepalive    *hcl.Attribute `hcl:"keepalive,optional"`
	Tool         *rawTool       `hcl:"tool,block"`
	Permission   *rawPermission `hcl:"permission,block"`
}

type rawTool struct {
	Open      *hcl.Attribute `hcl:"open,optional"`
	Close     *hcl.Attribute `hcl:"close,optional"`
	Quiet     *hcl.Attribute `hcl:"quiet,optional"`
	Key       *hcl.Attribute `hcl:"key,optional"`
	Name      *hcl.Attribute `hcl:"name,optional"`
	Title     *hcl.Attribute `hcl:"title,optional"`
	Kind      *hcl.Attribute `hcl:"kind,optional"`
	Input     *hcl.Attribute `hcl:"input,optional"`
	RawInput  *hcl.Attribute `hcl:"raw_input,optional"`
	Output    *hcl.Attribute `hcl:"output,optional"`
	RawOutput *hcl.Attribute `hcl:"raw_output,optional"`
	Status    *hcl.Attribute `hcl:"status,optional"`
}

type rawPermission struct {
	Title          *hcl.Attribute `hcl:"title,optional"`
	Options        *hcl.Attribute `hcl:"options,optional"`
	Allow          *hcl.Attribute `hcl:"allow,optional"`
	Reject         *hcl.Attribute `hcl:"reject,optional"`
	Cancelled      *hcl.Attribute `hcl:"cancelled,optional"`
	RejectEndsTurn *hcl.Attribute `hcl:"reject_ends_turn,optional"`
	// RejectReportWait: how long the turn's end waits after a refusal for
	// the agent's report of the refused call.
	RejectReportWait *hcl.Attribute `hcl:"reject_report_wait,optional"`
}

// Methods a profile may declare a request block for.
var knownMethods = map[string]bool{
	"initialize": true, "authenticate": true, "session/new": true, "session/prompt": true,
	"session/close": true, "session/load": true, "session/resume": true, "session/set_mode": true,
}

var stopReasons = map[string]bool{"end_turn": true, "max_tokens": true, "max_turn_requests": true, "refusal": true, "cancelled": true}

// Package rules is the rule engine: a dialect described in HCL instead of
// Go. A profile says how to recognise and read the agent's frames (gjson
// matches and paths), how to build the frames sent to it (templates), and
// which of a small set of behaviours apply (reply correlation, streaming,
// tools, permissions, turn end, cancel). Profiles are compiled once, when
// they load: a gjson path that cannot parse, a template that names an
// unknown variable or function, an attribute where it means nothing, or a
// reply that nothing could recognise is an error with its file:line:column,
// never a silent no-op at run time. The translator a profile makes is pure,
// like every translator (translate.Translator): time reaches it as input,
// and its heartbeats and silence rules are Timer outputs.
//
// Shipped profiles live in profiles/*.hcl (embedded; see Builtin); a user's
// profile is a dialect "name" { … } block of the configuration file (see
// Decode). Both are selected like any dialect.
//
// # A profile
//
//	summary     = "one line for `acp-bridge dialects`"
//	per_session = true              # one conversation per connection: one link per session
//	envelope    = "none"            # or "jsonrpc", "jsonrpc-lite" (no "jsonrpc" member)
//	route       = ["params.sessionId"]  # where events name the agent's session id
//
//	connect {                       # connection life (all optional)
//	  send           = { auth = env("API_KEY", "") }   # frames sent when the link is up
//	  expect         = { auth = true }                 # requests wait for this frame
//	  reject         = { auth = false }                # …and fail if this comes instead
//	  reject_message = "the agent refused API_KEY"
//	}
//	heartbeat { every = "30s", send = { type = "ping" }, reply = { type = "pong" } }
//	turn { silence = "1500ms", stop = "end_turn" }    # formats with no end marker
//
//	request "session/prompt" {      # one block per ACP method the agent supports
//	  send  = [frame, …]            # envelope "none": the frames to send
//	  method = "agent/prompt"       # JSON-RPC envelopes: the request to send…
//	  params = { prompt = prompt.text }               # …and its params
//	  notify = false                # true: send without an id, answer at once
//	  reply { … }                   # how the answer is recognised and read (a rule)
//	}
//	cancel { send = [frame, …] }    # absent: the bridge ends the turn itself
//	error { match = {…}, message = "agent: ${frame.error}", code = -32603 }
//	event "name" { match = {…} … } # tried in order; the first match wins
//
// Requests can be declared for initialize, authenticate, session/new,
// session/prompt, session/close, session/load, session/resume and
// session/set_mode; every other method is answered -32601. Without a
// request "initialize" block the bridge answers initialize itself (after
// connect's expect frame, when there is one). Without a request
// "session/new" block a session is opened without telling the agent.
// Declaring session/load or session/resume advertises it; the session
// they reopen keeps the editor's id, which on a shared link is the agent's
// own (session.agent_session).
//
// # Rules: events and replies
//
// A rule (an event block, or a request's reply block) has:
//
//	match         = { type = "token", "data.kind" = ["a", "b"], end = absent, text = present }
//	                # gjson path = value: equal; a list: any of them; absent (or null):
//	                # not there; present: there, with any value.
//	                # "$tool.open", "$tool.output", "$turn.running" test the bridge's state.
//	correlate     = "id"            # reply only: the reply's path equals the sent frame's
//	keep          = { agent_session = "data.sessionId" }   # reply only: session values
//	result        = { … }           # reply only: the ACP result (default per method)
//	send          = [frame, …]      # frames to send back to the agent
//	message       = frame.text      # agent_message_chunk
//	thought       = frame.text      # agent_thought_chunk
//	user_message  = frame.text      # user_message_chunk
//	plan          = frame.entries   # plan (an array of PlanEntry)
//	update        = [{ sessionUpdate = "…", … }]   # any session/update, as is
//	final_message = frame.result.content           # a chunk only if none streamed this turn
//	end_turn      = "end_turn"      # ends the turn with this stop reason
//	fail          = "message"       # fails the turn with a JSON-RPC error
//	tool { … }                      # tool calls, below
//	permission { … }                # asks the editor, below
//
// A rule acts in this order: send, tool, thought, message, user_message,
// plan, update, final_message, permission, then end_turn or fail.
//
// With a JSON-RPC envelope, the reply to a request sent with method is the
// response with its id, and an error response fails the editor's request
// with the agent's code and message. The reply of session/prompt ends the
// turn (end_turn unless it says otherwise). Frames no rule matches are
// counted as the Note "unmatched-frames"; requests from the agent that no
// event matches are answered -32601.
//
// Tools:
//
//	tool {
//	  open = true                   # a new tool call (else: find an open one)
//	  key  = frame.call_id          # correlation id; without one, tools pair by
//	  name = frame.name             # order and name, else the latest open tool
//	  title, kind, status           # ToolCall fields (kind/status outside ACP's sets are left out)
//	  input  = frame.code           # text appended to the call's input (shown as content)
//	  output = frame.stdout         # text appended to its output (shown as content)
//	  raw_input, raw_output         # JSON values
//	  quiet = true                  # change the state only; the tool_call is announced
//	                                # by the first non-quiet rule that touches it
//	  close = true                  # finished (status completed unless given)
//	}
//
// A turn that ends closes its open tool calls (completed, or failed when it
// fails or is cancelled).
//
// Permissions:
//
//	permission {
//	  title     = "Run ${tool.input}?"
//	  options   = [{ optionId = "run", name = "Run it", kind = "allow_once" }, …]
//	  allow     = [frame, …]        # sent when an allow_* option is chosen
//	  reject    = [frame, …]        # sent on a reject_* option (or an error)
//	  cancelled = [frame, …]        # sent when the turn is cancelled meanwhile
//	  reject_ends_turn = true       # default
//	}
//
// # Templates
//
// Templates are HCL expressions compiled into JSON builders: literals,
// objects (key order is kept; a member whose value is absent is left out),
// lists, quoted strings with ${…} (always strings: "${id}" is "3"), list
// for expressions [for i, v in LIST : EXPR if COND] (COND may use == and
// !=; as a whole send value, each element is sent as its own frame, e.g.
// one frame per prompt block), and:
//
//	frame.<path>      the agent frame (rules), a gjson path; frame["a.b|c"] for any path
//	params.<path>     the editor request's params
//	prompt.text       the prompt's text blocks joined with newlines
//	prompt.blocks     the prompt's ACP content blocks, as they came (a JSON array)
//	session.id        the ACP session id; session.cwd its cwd;
//	session.<name>    a value a reply kept
//	tool.id, tool.name, tool.title, tool.input, tool.output   the current tool call
//	id                a fresh agent-hop counter (a number)
//	now               the input's time, RFC 3339
//	env("NAME"), env("NAME", "default")      read when the dialect is configured
//	map(x, { a = "b" }, default)   default(a, b, …)   join(list, sep)   string(x)   tojson(x)
//
// A variable a place cannot see (frame in a request, tool in a connect
// block) is a load-time error, as is session.<name> that no reply keeps.
package rules

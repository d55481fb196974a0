package rules

import (
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate/translatetest"
)

func env(name string) (string, bool) {
	if name == "INTERPRETER_API_KEY" {
		return "sk-test", true
	}
	return "", false
}

// shipped returns the shipped profile name, failing the test when any
// shipped profile does not compile.
func shipped(t testing.TB, name string) *Profile {
	t.Helper()
	entries, err := profileFiles.ReadDir("profiles")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, _ := profileFiles.ReadFile("profiles/" + e.Name())
		p, diags := Parse("profiles/"+e.Name(), src)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", e.Name(), diags.Error())
		}
		if p.Name == name {
			p.Env = env
			return p
		}
	}
	t.Fatalf("no shipped profile %q", name)
	return nil
}

func TestShippedProfilesCompile(t *testing.T) {
	ps := Profiles(env)
	entries, _ := profileFiles.ReadDir("profiles")
	if len(ps) != len(entries) || len(ps) < 5 {
		for _, e := range entries {
			shipped(t, e.Name()) // reports the diagnostics
		}
		t.Fatalf("%d of %d shipped profiles compile", len(ps), len(entries))
	}
}

func TestGolden(t *testing.T) {
	for _, name := range []string{"mini-agent-ws", "agent-rpc", "open-interpreter", "zeroclaw", "chat-lines"} {
		t.Run(name, func(t *testing.T) {
			translatetest.Run(t, shipped(t, name).Dialect(), "testdata/"+name+"/*.txtar")
		})
	}
}

// inline exercises what the shipped profiles do not: a JSON-RPC lite
// envelope, correlation by a field, prompt.blocks, a reply's result, and
// user_message and whole updates.
const inline = `
envelope = "jsonrpc-lite"
request "initialize" {
  method = "hello"
  params = { v = 1 }
}
request "session/new" {
  method = "open"
  params = { dir = session.cwd }
}
request "session/prompt" {
  send = { ref = "p-${id}", blocks = prompt.blocks }
  reply {
    correlate    = "ref"
    user_message = frame.echo
    update       = { sessionUpdate = "agent_message_chunk", content = { type = "text", text = upper_say } }
    message      = frame.say
  }
}
request "session/load" {
  method = "load"
  params = { id = session.agent_session, dir = params.cwd }
}
event "note" {
  match   = { note = present, ref = absent }
  thought = frame.note
}
`

func TestGoldenInline(t *testing.T) {
	src := strings.Replace(inline, "text = upper_say", "text = join([frame.say, \"!\"], \"\")", 1)
	p, diags := Parse("inline.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/inline/*.txtar")
}

const perBlock = `
request "session/prompt" {
  send = [for i, b in prompt.blocks : { n = i, kind = b.type, text = default(b.text, b.uri) } if b.type != "image"]
}
event "done" {
  match   = { done = true }
  message = join([for b in ["a", "b"] : b], "+")
  end_turn = "end_turn"
}
`

func TestGoldenPerBlock(t *testing.T) {
	p, diags := Parse("per-block.hcl", []byte(perBlock))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/inline-blocks/*.txtar")
}

// quiet is a profile whose "done" rule has a typo: the turn never ends by
// itself, and the quiet warning and give_up are what the bridge has.
const quiet = `
turn {
  quiet   = "10s"
  give_up = "25s"
}
request "session/prompt" {
  send = { ask = prompt.text }
}
event "delta" {
  match   = { kind = "delta" }
  message = frame.text
}
event "done" {
  match    = { kind = "dnoe" }
  end_turn = "end_turn"
}
`

func TestGoldenQuiet(t *testing.T) {
	p, diags := Parse("quiet.hcl", []byte(quiet))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/quiet/*.txtar")
}

// turnScope is a profile for a protocol whose client picks a chat id per
// prompt: the frames name their turn (turn { key }), the stop and the
// final frame refer to the turn's id (turn.sent), and the agent
// acknowledges a stop (cancel { ack }).
const turnScope = `
turn {
  key = "chat_id"
}
request "session/prompt" {
  send = { type = "chat", chat_id = "${session.id}-${id}", message = prompt.text }
}
cancel {
  send  = { cmd = "stop", chat_id = turn.sent.chat_id }
  ack   = { type = "stopped", chat_id = turn.sent.chat_id }
  grace = "3s"
}
error {
  match   = { type = "error" }
  message = "chatwire: ${frame.message}"
}
event "delta" {
  match   = { type = "delta" }
  message = frame.text
}
event "tool-use" {
  match = { type = "tool_use" }
  tool {
    open      = true
    key       = frame.use_id
    name      = frame.tool
    raw_input = frame.input
    status    = "in_progress"
  }
}
event "tool-result" {
  match = { type = "tool_result" }
  tool {
    key    = frame.use_id
    output = frame.output
    close  = true
  }
}
event "final" {
  match    = { type = "final", chat_id = turn.sent.chat_id }
  end_turn = "end_turn"
}
`

func TestGoldenTurnScope(t *testing.T) {
	p, diags := Parse("chatwire.hcl", []byte(turnScope))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/turn-scope/*.txtar")
}

// TestGoldenCancelGrace runs turnScope without its cancel grace, which is
// then the engine's (the transcripts' cancel-grace), and with it, which
// wins.
func TestGoldenCancelGrace(t *testing.T) {
	src := strings.Replace(turnScope, "  grace = \"3s\"\n", "", 1)
	if src == turnScope {
		t.Fatal("turnScope has no grace line to remove")
	}
	for name, src := range map[string]string{"engine": src, "request": src, "explicit": turnScope} {
		p, diags := Parse("chatwire.hcl", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		translatetest.Run(t, p.Dialect(), "testdata/cancel-grace/"+name+".txtar")
	}
}

// turnKeep is a profile for an agent that assigns the turn's id itself, in
// its first event: the event keeps it in turn scope (turn.run).
const turnKeep = `
request "session/prompt" {
  send = { op = "ask", text = prompt.text }
}
cancel {
  send = { op = "stop", run = turn.run }
  ack  = { event = "stopped", run = turn.run }
}
event "started" {
  match = { event = "started" }
  keep  = { run = "run" }
}
event "token" {
  match   = { event = "token", run = turn.run }
  message = frame.text
}
event "done" {
  match    = { event = "done", run = turn.run }
  end_turn = "end_turn"
}
`

func TestGoldenTurnKeep(t *testing.T) {
	p, diags := Parse("run-id.hcl", []byte(turnKeep))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/turn-keep/*.txtar")
}

// turnKeepKey is turnKeep with a turn key whose turn side is the run id
// the agent assigns (turn.run), not the prompt's frame.
const turnKeepKey = "turn {\n  key = { frame = \"run\", turn = \"run\" }\n}\n" + turnKeep

func TestGoldenTurnKeepKey(t *testing.T) {
	p, diags := Parse("run-id.hcl", []byte(turnKeepKey))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/turn-keep-key/*.txtar")
}

// turnNumber sends a number id and matches the agent's echo of it.
const turnNumber = `
request "session/prompt" {
  send = { ask = prompt.text, id = id }
}
event "text" {
  match   = { to = turn.sent.id, text = present }
  message = frame.text
}
event "done" {
  match    = { to = turn.sent.id, done = true }
  end_turn = "end_turn"
}
`

func TestGoldenTurnNumber(t *testing.T) {
	p, diags := Parse("turn-number.hcl", []byte(turnNumber))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/turn-number/*.txtar")
}

// promptKeep keeps a session value from the reply of session/prompt.
const promptKeep = `
request "session/prompt" {
  send = { ask = prompt.text, conv = session.conv }
  reply {
    match         = { answer = present }
    keep          = { conv = "conv" }
    final_message = frame.answer
  }
}
`

func TestGoldenPromptKeep(t *testing.T) {
	p, diags := Parse("prompt-keep.hcl", []byte(promptKeep))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/prompt-keep/*.txtar")
}

// jobq is a job queue's protocol: the client numbers its jobs, every frame
// names its job (turn { key }), a question is answered naming the job and
// the question (turn.sent in a permission's answer frames), and the stop
// names a job no turn has (a constant), which the agent refuses with an
// error frame naming that job.
const jobq = `
turn {
  key = "job"
}
request "session/prompt" {
  send = { op = "run", job = id, text = prompt.text }
}
cancel {
  send = { op = "abort", job = 999 }
}
error {
  match   = { op = "fail" }
  message = "jobq ${frame.code}: ${frame.msg}"
}
event "progress" {
  match   = { op = "progress" }
  message = frame.text
}
event "ask" {
  match = { op = "ask" }
  permission {
    allow     = { op = "approve", job = turn.sent.job, ask = frame.ask }
    reject    = { op = "deny", job = turn.sent.job, ask = frame.ask }
    cancelled = { op = "deny", job = turn.sent.job, ask = frame.ask, why = "cancelled" }
  }
}
event "done" {
  match    = { op = "done" }
  end_turn = "end_turn"
}
`

func TestGoldenJobq(t *testing.T) {
	p, diags := Parse("jobq.hcl", []byte(jobq))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/jobq/*.txtar")
}

// quietPing is quiet for an agent that pings every few seconds while it
// works (answered by the ping event) and sends a status line (a keepalive
// event): neither keeps the hung turn from its warning and give_up.
const quietPing = `
turn {
  quiet   = "2s"
  give_up = "5s"
}
request "session/prompt" {
  send = { ask = prompt.text }
}
event "ping" {
  match = { kind = "ping" }
  send  = { kind = "pong" }
}
event "status" {
  match     = { kind = "status" }
  thought   = frame.text
  keepalive = true
}
event "delta" {
  match   = { kind = "delta" }
  message = frame.text
}
event "done" {
  match    = { kind = "dnoe" }
  end_turn = "end_turn"
}
`

func TestGoldenQuietPing(t *testing.T) {
	p, diags := Parse("quiet-ping.hcl", []byte(quietPing))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/quiet-ping/*.txtar")
}

// TestGoldenJobqNoWait: reject_report_wait = "0s" keeps a refusal's end
// of the turn immediate.
func TestGoldenJobqNoWait(t *testing.T) {
	src := strings.Replace(jobq, "    cancelled = {", "    reject_report_wait = \"0s\"\n    cancelled = {", 1)
	if src == jobq {
		t.Fatal("the jobq profile's permission block moved; set reject_report_wait in it")
	}
	p, diags := Parse("jobq-nowait.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	translatetest.Run(t, p.Dialect(), "testdata/jobq-nowait/*.txtar")
}

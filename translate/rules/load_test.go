package rules

import (
	"strings"
	"testing"
)

// prompt is the smallest valid profile body line: a profile must say how
// a prompt is sent.
const prompt = "request \"session/prompt\" {\n  send = { text = prompt.text }\n}\n"

// TestLoadErrors pins that what a profile cannot express fails at load
// time, at the position of the offending text.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name     string
		src      string
		summary  string
		line     int
		col      int
		inDetail string
	}{
		{"unknown variable", "request \"session/prompt\" {\n  send = { text = promt.text }\n}\n",
			"Unknown variable", 2, 19, `"promt"`},
		{"unknown attribute of prompt", "request \"session/prompt\" {\n  send = { text = prompt.body }\n}\n",
			"Unknown variable", 2, 19, "prompt.blocks"},
		{"frame in a request", "request \"session/prompt\" {\n  send = { text = frame.x }\n}\n",
			"Variable not available here", 2, 19, "request's frames"},
		{"unknown function", prompt + "event \"e\" {\n  match   = { a = 1 }\n  message = upper(frame.a)\n}\n",
			"Unknown function", 6, 13, "upper"},
		{"bad gjson path in a match", prompt + "event \"e\" {\n  match = { \"a..b\" = 1 }\n}\n",
			"Invalid gjson path", 5, 13, "empty component"},
		{"bad gjson path in a reference", prompt + "event \"e\" {\n  match   = { a = 1 }\n  message = frame[\"a.(b\"]\n}\n",
			"Invalid gjson path", 6, 13, "unbalanced"},
		{"unknown modifier", prompt + "event \"e\" {\n  match = { \"@upper\" = 1 }\n}\n",
			"Invalid gjson path", 5, 13, "@upper"},
		{"unknown state", prompt + "event \"e\" {\n  match = { \"$tool.count\" = 1 }\n}\n",
			"Unknown state", 5, 13, "$tool.count"},
		{"session value never kept", "request \"session/prompt\" {\n  send = { sid = session.agent_session }\n}\n",
			"Unknown session value", 2, 18, "keep"},
		{"bad envelope", "envelope = \"xml\"\n" + prompt,
			"Invalid envelope", 1, 12, `"xml"`},
		{"method without envelope", "request \"session/prompt\" {\n  method = \"chat\"\n}\n",
			"method without a JSON-RPC envelope", 2, 3, "send"},
		{"reply that cannot be recognised", "request \"session/prompt\" {\n  send = { a = 1 }\n  reply {\n    final_message = frame.text\n  }\n}\n",
			"Reply cannot be recognised", 3, 3, "match"},
		{"no prompt request", "summary = \"x\"\n",
			"No session/prompt request", 1, 1, "session/prompt"},
		{"bad stop reason", prompt + "event \"e\" {\n  match    = { a = 1 }\n  end_turn = \"done\"\n}\n",
			"Invalid stop reason", 6, 14, "end_turn"},
		{"bad stop reason in a map", prompt + "event \"e\" {\n  match    = { a = 1 }\n  end_turn = map(frame.r, { length = \"max_tokens\", x = \"stop\" }, \"end_turn\")\n}\n",
			"Invalid stop reason", 6, 14, `"stop"`},
		{"bad stop reason in a branch", prompt + "event \"e\" {\n  match    = { a = 1 }\n  end_turn = frame.r == \"x\" ? \"refusal\" : \"done\"\n}\n",
			"Invalid stop reason", 6, 14, `"done"`},
		{"unknown argument", prompt + "event \"e\" {\n  match  = { a = 1 }\n  messge = frame.a\n}\n",
			"Unsupported argument", 6, 3, "messge"},
		{"bad duration", prompt + "turn {\n  silence = \"soon\"\n}\n",
			"Invalid silence", 5, 13, "soon"},
		{"stop without silence", prompt + "turn {\n  stop = \"cancelled\"\n}\n",
			"stop without silence", 5, 3, "silence"},
		{"bad give_up", prompt + "turn {\n  give_up = \"-1m\"\n}\n",
			"Invalid give_up", 5, 13, "-1m"},
		{"bad quiet", prompt + "turn {\n  quiet = \"0s\"\n}\n",
			"Invalid quiet", 5, 11, "0s"},
		{"bad reject_report_wait", prompt + "event \"e\" {\n  match = { a = 1 }\n  permission {\n    reject_report_wait = \"-1s\"\n  }\n}\n",
			"Invalid reject_report_wait", 7, 26, "-1s"},
		{"reject_report_wait without reject_ends_turn", prompt + "event \"e\" {\n  match = { a = 1 }\n  permission {\n    reject_ends_turn   = false\n    reject_report_wait = \"1s\"\n  }\n}\n",
			"reject_report_wait without reject_ends_turn", 8, 5, "reject_ends_turn = false"},
		{"unsupported method", prompt + "request \"session/fork\" {\n  send = { a = 1 }\n}\n",
			"Unsupported request", 4, 1, "session/fork"},
		{"tool outside a rule", "request \"session/prompt\" {\n  send = { t = tool.id }\n}\n",
			"Variable not available here", 2, 16, "request"},
		{"event without match", prompt + "event \"e\" {\n  message = \"x\"\n}\n",
			"Event without match", 4, 1, "match"},
		{"correlate outside a reply", prompt + "event \"e\" {\n  match     = { a = 1 }\n  correlate = \"a\"\n}\n",
			"Not allowed here", 6, 3, "reply"},
		{"keepalive in a reply", "request \"session/prompt\" {\n  send = { a = 1 }\n  reply {\n    match     = { b = 1 }\n    keepalive = true\n  }\n}\n",
			"Not allowed here", 5, 5, "events"},
		{"keepalive that ends the turn", prompt + "event \"e\" {\n  match     = { a = 1 }\n  keepalive = true\n  end_turn  = \"end_turn\"\n}\n",
			"Keepalive ends nothing", 6, 3, "end_turn"},
		{"unsupported expression", prompt + "event \"e\" {\n  match   = { a = 1 }\n  message = frame.a + 1\n}\n",
			"Unsupported expression", 6, 13, "template"},
		{"loop variable shadows a variable", "request \"session/prompt\" {\n  send = [for frame in prompt.blocks : frame]\n}\n",
			"Invalid loop variable", 2, 10, `"frame"`},
		{"object for expression", "request \"session/prompt\" {\n  send = { m = {for b in prompt.blocks : b.type => b} }\n}\n",
			"Unsupported expression", 2, 16, "list"},
		{"unknown variable in a loop", "request \"session/prompt\" {\n  send = [for b in prompt.blocks : c.text]\n}\n",
			"Unknown variable", 2, 36, `"c"`},
		// Turn scope.
		{"turn in the prompt's own frame", "request \"session/prompt\" {\n  send = { id = turn.sent.id }\n}\n",
			"Variable not available here", 2, 17, "turn.sent is the frame"},
		{"turn value never kept", prompt + "event \"e\" {\n  match   = { a = 1 }\n  message = turn.run\n}\n",
			"Unknown turn value", 6, 13, "keep = { run"},
		{"turn.sent without a path", prompt + "event \"e\" {\n  match   = { a = 1 }\n  message = turn.sent\n}\n",
			"Unknown variable", 6, 13, "turn.sent.PATH"},
		{"turn value in the prompt's own frame", "request \"session/prompt\" {\n  send = { run = turn.run }\n}\nevent \"e\" {\n  match = { a = 1 }\n  keep  = { run = \"a\" }\n}\n",
			"Variable not available here", 2, 18, "turn values"},
		{"an event keeps sent", prompt + "event \"e\" {\n  match = { a = 1 }\n  keep  = { sent = \"a\" }\n}\n",
			"Reserved name", 6, 13, "turn.sent"},
		{"a kept name with a dot", prompt + "event \"e\" {\n  match = { a = 1 }\n  keep  = { \"a.b\" = \"a\" }\n}\n",
			"Invalid keep", 6, 13, "flat names"},
		{"bad gjson path under turn.sent", prompt + "event \"e\" {\n  match   = { a = 1 }\n  message = turn.sent[\"a..b\"]\n}\n",
			"Invalid gjson path", 6, 13, "turn.sent.a..b"},
		{"turn in a connect match", prompt + "connect {\n  expect = { id = turn.sent.id }\n}\n",
			"Variable not available here", 5, 19, "connect"},
		{"frame as a match value", prompt + "event \"e\" {\n  match = { a = frame.b }\n}\n",
			"Invalid match value", 5, 17, "turn.sent.PATH"},
		{"match value never kept", prompt + "event \"e\" {\n  match = { conv = session.conv }\n}\n",
			"Unknown session value", 5, 20, "keep"},
		{"turn key not a path", prompt + "turn {\n  key = 3\n}\n",
			"Invalid key", 5, 9, "chat_id"},
		{"turn key object without sent", prompt + "turn {\n  key = { frame = \"chat\" }\n}\n",
			"Invalid key", 5, 9, "sent"},
		{"bad gjson path as turn key", prompt + "turn {\n  key = \"a..b\"\n}\n",
			"Invalid gjson path", 5, 9, "empty component"},
		{"turn key with both sent and turn", prompt + "turn {\n  key = { frame = \"run\", sent = \"run\", turn = \"run\" }\n}\n",
			"Invalid key", 5, 9, "turn = \"run\""},
		{"turn key naming a value no event keeps", prompt + "turn {\n  key = { frame = \"run\", turn = \"run\" }\n}\n",
			"Unknown turn value", 5, 33, "keep = { run"},
		{"turn key naming the prompt's frame", prompt + "turn {\n  key = { frame = \"run\", turn = \"sent.run\" }\n}\n",
			"Invalid key", 5, 33, "sent = \"path\""},
		{"turn key naming a number", prompt + "turn {\n  key = { frame = \"run\", turn = 7 }\n}\n",
			"Invalid key", 5, 33, "keep ="},
		{"bad gjson path as kept turn key's frame", prompt + "event \"e\" {\n  match = { a = 1 }\n  keep  = { run = \"run\" }\n}\nturn {\n  key = { frame = \"a..b\", turn = \"run\" }\n}\n",
			"Invalid gjson path", 9, 9, "empty component"},
		{"cancel ack without send", prompt + "cancel {\n  ack = { type = \"stopped\" }\n}\n",
			"ack without send", 5, 3, "send"},
		{"cancel grace without ack", prompt + "cancel {\n  send  = { op = \"stop\" }\n  grace = \"5s\"\n}\n",
			"grace without ack", 6, 3, "ack"},
		{"bad cancel grace", prompt + "cancel {\n  send  = { op = \"stop\" }\n  ack   = { type = \"stopped\" }\n  grace = \"soon\"\n}\n",
			"Invalid grace", 7, 11, "soon"},
		{"syntax error", "request \"session/prompt\" {\n  send = {\n}\n",
			"", 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := Parse("my.hcl", []byte(tt.src))
			if !diags.HasErrors() || p != nil {
				t.Fatalf("Parse succeeded (%v); want an error", p)
			}
			if tt.summary == "" {
				return // any syntax error will do
			}
			for _, d := range diags {
				if d.Summary != tt.summary {
					continue
				}
				if d.Subject == nil || d.Subject.Filename != "my.hcl" || d.Subject.Start.Line != tt.line || d.Subject.Start.Column != tt.col {
					t.Errorf("%s at %v, want my.hcl:%d,%d", tt.summary, d.Subject, tt.line, tt.col)
				}
				if !strings.Contains(d.Detail, tt.inDetail) {
					t.Errorf("detail %q lacks %q", d.Detail, tt.inDetail)
				}
				return
			}
			t.Errorf("no %q diagnostic; got: %s", tt.summary, diags.Error())
		})
	}
}

func TestCheckPath(t *testing.T) {
	for _, ok := range []string{"a", "a.b", "data.sessionId", `a\.b`, "items.#", "items.0.name", "a|b", `friends.#(last=="Murphy").first`, "@this", "a.@reverse"} {
		if err := checkPath(ok); err != nil {
			t.Errorf("checkPath(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "a..b", ".a", "a.", `a\`, "a.(b", "a)", "@nope", `#(a=="x)`} {
		if err := checkPath(bad); err == nil {
			t.Errorf("checkPath(%q) = nil, want an error", bad)
		}
	}
}

// A profile reading an environment variable without a default cannot be
// configured while it is unset.
func TestConfigureNeedsEnv(t *testing.T) {
	p, diags := Parse("e.hcl", []byte("request \"session/prompt\" {\n  send = { key = env(\"RULES_TEST_KEY\"), text = prompt.text }\n}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, diags := p.Dialect().Configure(nil); !diags.HasErrors() || !strings.Contains(diags.Error(), "RULES_TEST_KEY") {
		t.Errorf("Configure with the variable unset = %v; want an error naming it", diags)
	}
	p.Env = func(string) (string, bool) { return "k", true }
	if _, diags := p.Dialect().Configure(nil); diags.HasErrors() {
		t.Errorf("Configure with the variable set: %v", diags)
	}
}

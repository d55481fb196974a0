package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/urfave/cli/v2"
)

// dialectsNewCommand is `acp-bridge dialects new NAME`: a commented rule
// profile to start from, written to NAME.hcl.
func dialectsNewCommand() *cli.Command {
	return &cli.Command{
		Name:         "new",
		Usage:        "write NAME.hcl, a commented rule profile to start a profile of your own from; never overwrites",
		ArgsUsage:    "NAME",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"},
			Usage: "write the profile to `FILE` instead of NAME.hcl in the current directory"}},
		Action: dialectsNewAction,
	}
}

// profileNames are the names a profile may have: what --dialect and a
// file's base name can both carry.
var profileNames = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

func dialectsNewAction(c *cli.Context) error {
	name := c.Args().First()
	switch {
	case name == "":
		return launch.Usagef("dialects new needs the profile's NAME, such as 'acp-bridge dialects new mychat'")
	case c.Args().Len() > 1:
		return launch.Usagef("dialects new takes one NAME; got %q", c.Args().Slice())
	case !profileNames.MatchString(name):
		return launch.Usagef("%q cannot name a profile: use lower-case letters, digits, '.', '-' and '_', starting with a letter or digit", name)
	}
	if _, taken := launch.Dialects()[name]; taken {
		return launch.Usagef("%q is a dialect built into acp-bridge; give your profile another name", name)
	}
	path := c.String("output")
	if path == "" {
		path = name + ".hcl"
	}
	if profileName(path) != name {
		return launch.Usagef("--output %s would name the dialect %q, not %q: a profile file's base name is its dialect's name", path, profileName(path), name)
	}
	// O_EXCL: the check and the creation are one step.
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("dialects new: %s already exists; not overwriting it", path)
	}
	if err != nil {
		return fmt.Errorf("dialects new: %w", err)
	}
	if _, err := io.WriteString(file, ProfileTemplate(name)); err != nil {
		file.Close()
		return fmt.Errorf("dialects new: %w", err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("dialects new: %w", err)
	}
	_, err = fmt.Fprintf(os.Stdout, "wrote %s\nedit it for your agent's frames, then try one turn:\n  acp-bridge doctor --profile %s --url ws://127.0.0.1:9000/ --prompt hello\n", path, path)
	return err
}

// ProfileTemplate is the profile `dialects new NAME` writes: every common
// rule, commented, for a made-up WebSocket chat format. It compiles as it
// is (a test keeps it so).
func ProfileTemplate(name string) string {
	return strings.ReplaceAll(profileTemplate, "NAME", name)
}

const profileTemplate = `# Rule profile NAME (written by 'acp-bridge dialects new NAME').
# The rule language: 'acp-bridge dialects doc'. Shipped examples:
# 'acp-bridge dialects', then 'acp-bridge dialects show open-interpreter'.
#
# Use it:   acp-bridge --profile NAME.hcl --url ws://127.0.0.1:9000/
# Try it:   acp-bridge doctor --profile NAME.hcl --url ws://127.0.0.1:9000/ --prompt hello
# Check it: acp-bridge check -- acp-bridge --profile NAME.hcl --url ws://127.0.0.1:9000/
#
# It is written for an agent that speaks this (edit it to yours):
#   C→S {"type":"chat","chat_id":"…","message":"…"}   the client picks chat_id
#   S→C {"type":"delta","chat_id":"…","text":"…"}       streamed answer
#   S→C {"type":"tool_use","chat_id":"…","use_id":"…","tool":"…","input":{…}}
#   S→C {"type":"tool_result","chat_id":"…","use_id":"…","output":"…"}
#   S→C {"type":"final","chat_id":"…"}                   turn over
#   S→C {"type":"error","chat_id":"…","message":"…"}     turn failed
#   C→S {"cmd":"stop","chat_id":"…"}                     cancel
#   S→C {"type":"stopped","chat_id":"…"}                 the stop acknowledged

summary = "NAME: describe your agent in one line"

# true when the agent holds one conversation per connection.
per_session = false

# false when the agent keeps no chat history (jobs, commands): a session
# reopened on a new agent session then gets no transcript before its next
# prompt, which such an agent would run as asks.
# history_preamble = false

turn {
  # The path where the agent's frames name their turn, compared with the
  # same path of the prompt's frame: frames of other turns are dropped.
  key = "chat_id"
  # A turn with no frame a rule matched for this long is logged at WARN.
  quiet = "30s"
  # give_up = "2m"   # ...and failed after this long
}

request "session/prompt" {
  # id is a fresh number per request: with the session id, a chat id no
  # other turn has. Later rules read it back as turn.sent.chat_id.
  send = { type = "chat", chat_id = "${session.id}-${id}", message = prompt.text }
}

cancel {
  send = { cmd = "stop", chat_id = turn.sent.chat_id }
  # How the agent acknowledges the stop; unacknowledged after grace, the
  # stop is reported at WARN.
  ack   = { type = "stopped", chat_id = turn.sent.chat_id }
  grace = "5s"
}

error {
  match   = { type = "error" }
  message = "NAME: ${frame.message}"
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
    title     = "${frame.tool} ${tojson(frame.input)}"
    kind      = map(frame.tool, { grep = "search", read = "read", shell = "execute" }, "other")
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

# Open Interpreter's server (`interpreter --server`, 0.3/0.4): LMC messages
# over a WebSocket. One conversation per socket. Sources, in
# https://github.com/OpenInterpreter/open-interpreter: docs/server/usage.mdx
# (the WebSocket API: start/end flags, the "go" and "stop" commands, the
# "complete" status), docs/protocols/lmc-messages.mdx (the message format,
# also https://docs.openinterpreter.com/protocols/lmc-messages) and the
# server itself, interpreter/core/async_core.py.
#
# A code block becomes a tool call (kind execute) announced when the block
# ends, with the code as its content; console output is appended to it.
# "status complete" ends the turn, unless a code block is still waiting
# without output: with auto_run off the server stops right after the code
# and waits for the "go" command, so the bridge asks the editor first.

summary     = "Open Interpreter server (LMC over WebSocket), one connection per session"
per_session = true

connect {
  send           = { auth = env("INTERPRETER_API_KEY", "") }
  expect         = { auth = true }
  reject         = { auth = false }
  reject_message = "Open Interpreter refused the API key: set INTERPRETER_API_KEY to the server's key"
}

request "session/prompt" {
  send = [
    { role = "user", start = true },
    { role = "user", type = "message", content = prompt.text },
    { role = "user", end = true },
  ]
}

cancel {
  send = [
    { role = "user", type = "command", start = true },
    { role = "user", type = "command", content = "stop" },
    { role = "user", type = "command", end = true },
  ]
  # The server answers a stop by ending the run as it ends any other:
  # "status complete" after a stop is its acknowledgement, not a turn it
  # finished instead of stopping.
  ack = { role = "server", type = "status", content = "complete" }
}

error {
  match   = { role = "server", type = "error" }
  message = "Open Interpreter: ${frame.content}"
}

# A new assistant message means the code before it has finished.
event "message-start" {
  match = { role = "assistant", type = "message", start = true }
  tool {
    status = "completed"
    close  = true
  }
}

event "message-end" {
  match = { role = "assistant", type = "message", end = true }
}

event "message" {
  match   = { role = "assistant", type = "message" }
  message = frame.content
}

event "code-start" {
  match = { role = "assistant", type = "code", start = true }
  tool {
    open  = true
    quiet = true
    name  = frame.format
    title = "Run ${frame.format} code"
    kind  = "execute"
  }
}

event "code-end" {
  match = { role = "assistant", type = "code", end = true }
  tool {
    status = "pending"
  }
}

event "code" {
  match = { role = "assistant", type = "code" }
  tool {
    input = frame.content
    quiet = true
  }
}

event "console-output" {
  match = { role = "computer", type = "console", format = "output" }
  tool {
    output = frame.content
    status = "in_progress"
  }
}

event "console-other" {
  match = { role = "computer", type = "console" }
}

event "confirmation" {
  match = { type = "confirmation" }
}

event "awaiting-approval" {
  match = { role = "server", type = "status", content = "complete", "$tool.open" = true, "$tool.output" = "" }
  permission {
    title   = "Run this ${tool.name} code?"
    options = [
      { optionId = "run", name = "Run it", kind = "allow_once" },
      { optionId = "skip", name = "Don't run it", kind = "reject_once" },
    ]
    allow = [
      { role = "user", type = "command", start = true },
      { role = "user", type = "command", content = "go" },
      { role = "user", type = "command", end = true },
    ]
  }
}

event "complete" {
  match    = { role = "server", type = "status", content = "complete" }
  end_turn = "end_turn"
}

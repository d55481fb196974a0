# Chatwire: a made-up WebSocket chat format whose client picks a chat id
# per prompt (tests/fakeagent/rules/chatwire.go). A profile file, as
# --profile FILE reads it; its dialect is the file's base name.

summary = "Chatwire: a made-up chat format with a chat id per prompt (tests)"

turn {
  key = "chat_id"
}

request "session/prompt" {
  send = { type = "chat", chat_id = "${session.id}-${id}", message = prompt.text }
}

cancel {
  send  = { cmd = "stop", chat_id = turn.sent.chat_id }
  ack   = { type = "stopped", chat_id = turn.sent.chat_id }
  grace = "2s"
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
    kind      = map(frame.tool, { grep = "search" }, "other")
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

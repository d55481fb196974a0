# The profile that docs/bridge-your-agent.md builds, for the made-up
# Tinychat WebSocket format. tests/rules_e2e_test.go runs it against
# tests/fakeagent/rules/tinychat.go and checks that the page quotes this
# block and the agent block verbatim; tests/readme_test.go points the
# agent block at a fake Tinychat and runs the page's check.
dialect "tinychat" {
  summary = "Tinychat: a made-up WebSocket chat format (docs/bridge-your-agent.md worked example)"
  route   = ["conv"]

  connect {
    expect = { event = "hello" }
  }

  request "session/new" {
    send = { op = "open", cwd = session.cwd }
    reply {
      match = { event = "opened" }
      keep  = { agent_session = "conv" }
    }
  }

  request "session/prompt" {
    send = { op = "ask", conv = session.agent_session, text = prompt.text }
  }

  cancel {
    send = { op = "stop", conv = session.agent_session }
  }

  error {
    match   = { event = "error" }
    message = "tinychat: ${frame.message}"
  }

  event "token" {
    match   = { event = "token" }
    message = frame.text
  }

  event "tool" {
    match = { event = "tool" }
    tool {
      open      = true
      key       = frame.call
      name      = frame.name
      title     = "${frame.name} ${tojson(frame.input)}"
      kind      = map(frame.name, { grep = "search", read = "read" }, "other")
      raw_input = frame.input
      status    = "in_progress"
    }
  }

  event "tool-done" {
    match = { event = "tool_done" }
    tool {
      key    = frame.call
      output = frame.output
      close  = true
    }
  }

  event "done" {
    match    = { event = "done" }
    end_turn = "end_turn"
  }
}

agent "tinychat" {
  dialect = "tinychat"
  websocket {
    url = "ws://127.0.0.1:9000/"
  }
}

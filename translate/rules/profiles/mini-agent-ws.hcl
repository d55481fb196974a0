# The WebSocket protocol of the Mini-Agent fork Zazzles2908/Mini-Agent_ACP,
# as its server implements it: mini_agent/acp/enhanced_server.py in
# https://github.com/Zazzles2908/Mini-Agent_ACP.
#
# Every client frame carries exactly id, type, timestamp and optionally
# session_id and data (an unknown key makes the server fail to parse it).
# Replies carry fresh UUIDs, never the request's id, so they are recognised
# by their type. cancelSession poisons the whole session, so there is no
# cancel block: on session/cancel the bridge ends the turn itself and drops
# what the agent still sends for it.

summary     = "Mini-Agent fork's WebSocket JSON protocol (enhanced_server.py), one connection per session"
per_session = true

connect {
  expect = { type = "connection_established" }
}

heartbeat {
  every = "30s"
  send  = { id = "${id}", type = "heartbeat", timestamp = now }
  reply = { type = "heartbeat_response" }
}

error {
  match   = { type = "error" }
  message = "Mini-Agent: ${frame.error}"
}

request "initialize" {
  send = { id = "${id}", type = "initialize", timestamp = now }
  reply {
    match = { type = "initialize_response" }
  }
}

request "session/new" {
  send = { id = "${id}", type = "newSession", timestamp = now, data = { workspaceDir = session.cwd } }
  reply {
    match = { type = "new_session_response" }
    keep  = { agent_session = "data.sessionId" }
  }
}

request "session/prompt" {
  send = {
    id         = "${id}"
    type       = "prompt"
    timestamp  = now
    session_id = session.agent_session
    data       = { prompt = prompt.text }
  }
  reply {
    match         = { type = "prompt_response" }
    final_message = frame.data.content
  }
}

event "status" {
  match = { type = "status_update" }
}

event "housekeeping" {
  match = { type = ["connection_established", "cancel_session_response", "cleanup_response"] }
}

# A line-oriented JSON chat agent (stdio or WebSocket) with no end-of-turn
# marker, the shape of many home-made agents: the bridge sends
# {"message": …}, the agent streams {"kind":"delta"|"thought"|"plan", …}
# lines and then simply stops talking. The turn ends after 1.5 s without a
# frame. {"kind":"interrupt"} asks it to stop; the turn then ends, as
# cancelled, when it falls silent. An {"kind":"error"} line fails the turn.

summary = "line-oriented JSON chat with no end marker: a turn ends after 1.5 s of silence"

turn {
  silence = "1500ms"
}

request "session/prompt" {
  send = { message = prompt.text, cwd = session.cwd }
}

cancel {
  send = { kind = "interrupt" }
}

error {
  match   = { kind = "error" }
  message = "agent error: ${frame.text}"
}

event "delta" {
  match   = { kind = "delta" }
  message = frame.text
}

event "thought" {
  match   = { kind = "thought" }
  thought = frame.text
}

event "plan" {
  match = { kind = "plan" }
  plan  = frame.entries
}

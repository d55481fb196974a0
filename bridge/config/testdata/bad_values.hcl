log_level       = "loud"
max_message     = "64 parsecs"
request_timeout = "-5s"
cancel_grace    = "0s"

agent "a" {
  command    = []
  stop_grace = "soon"
  env        = { "BAD=NAME" = "x" }
}

agent "b" {
  websocket {
    url             = "ftp://agent.example/acp"
    headers         = { "Bad Header" = "v" }
    connect_timeout = "off"
    ping_period     = "-1s"
    pong_wait       = 30
  }
}

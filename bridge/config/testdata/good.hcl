# Every option, with env() in the places secrets go.
log_level       = "DEBUG"
log_file        = "logs/bridge.log"
max_message     = "2 MiB"
request_timeout = "off"
cancel_grace    = "1500ms"
default_agent   = "remote"

agent "gemini" {
  dialect    = "acp-v0"
  command    = ["gemini", "--experimental-acp", "--key=${env("TEST_ACP_BRIDGE_KEY")}"]
  env        = { GEMINI_API_KEY = env("TEST_ACP_BRIDGE_KEY"), PLAIN = "plain-value" }
  dir        = "work"
  stop_grace = "3s"
  options {
    protocol_version = "0.0.9"
  }
}

agent "remote" {
  websocket {
    url             = "wss://user:pw@agent.example/acp?token=t0k"
    headers         = { Authorization = "Bearer ${env("TEST_ACP_BRIDGE_TOKEN")}", X-Plain = env("TEST_ACP_BRIDGE_UNSET", "dflt") }
    subprotocols    = ["acp", "v1"]
    ca_file         = "/etc/ssl/ca.pem"
    connect_timeout = "7s"
    ping_period     = "off"
    pong_wait       = "45s"
  }
}

agent "minimal" {
  command = ["agent"]
}

agent "derived" {
  websocket {
    url         = env("TEST_ACP_BRIDGE_URL")
    ping_period = "0s"
  }
}

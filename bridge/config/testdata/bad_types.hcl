log_level = ["info"]
agent "a" {
  command = "gemini --experimental-acp"
}
agent "b" {
  command = ["x"]
  options {
  }
  options {
  }
}
agent "c" {
  websocket {
    url          = "ws://h/"
    subprotocols = "acp"
    headers      = ["Authorization"]
  }
}
agent "d" {
  websocket {
    url = "ws://h/"
  }
  websocket {
    url = "ws://h/"
  }
}

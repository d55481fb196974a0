default_agent = "nobody"

agent "both" {
  command = ["x"]
  websocket {
    url = "ws://127.0.0.1:1/"
  }
}

agent "neither" {
  dialect = "acp"
}

agent "both" {
  command = ["y"]
}

agent "ws" {
  env = { A = "b" }
  websocket {
  }
}

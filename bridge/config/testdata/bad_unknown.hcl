log_level = "info"
colour    = "blue"

agent "a" {
  command = ["x"]
  retries = 3
  socket {
  }
}

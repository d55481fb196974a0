log_level = "info"
agent "a" {
  command = ["x"
}

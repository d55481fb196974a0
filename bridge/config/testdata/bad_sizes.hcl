max_message = 512
agent "a" {
  command = ["x"]
}

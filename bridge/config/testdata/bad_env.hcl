agent "a" {
  command = ["x"]
  env     = { TOKEN = env("TEST_ACP_BRIDGE_SURELY_UNSET") }
}
agent "b" {
  command = [env()]
}
agent "c" {
  command = ["x", env("A", "b", "c")]
}
agent "d" {
  command = ["x"]
  env     = { K = nope("x") }
}

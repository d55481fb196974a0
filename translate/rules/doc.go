// Package rules is the rule engine: a dialect described in HCL instead of
// Go. A profile says how to recognise and read the agent's frames (gjson
// matches and paths), how to build the frames sent to it (templates), and
// which of a small set of behaviours apply (reply correlation, streaming,
// tools, permissions, turn end, cancel). Profiles are compiled once, when
// they load: a gjson path that cannot parse, a template that names an
// unknown variable or function, an attribute where it means nothing, or a
// reply that nothing could recognise is an error with its file:line:column,
// never a silent no-op at run time. The translator a profile makes is pure,
// like every translator (translate.Translator): time reaches it as input,
// and its heartbeats and silence rules are Timer outputs.
//
// Shipped profiles live in profiles/*.hcl (embedded; see Builtin); a user's
// profile is a dialect "name" { … } block of the configuration file (see
// Decode). Both are selected like any dialect.
//
// The rule language's reference is docs/profiles.md at the repository's
// root, which the binary prints as `acp-bridge dialects doc` (package docs
// embeds it). It lives there, not here, so that users of an installed
// binary can read it; doc_test.go keeps it current with the compiler (every
// schema name, variable, function, method and stop reason is documented,
// and its examples compile).
package rules

// Package docs holds the user documentation an installed binary can print,
// embedded from the Markdown files beside it: what `acp-bridge dialects doc`
// prints and what the repository shows are the same bytes.
package docs

import _ "embed"

// Profiles is docs/profiles.md, the reference of the rule language in which
// dialects are described (translate/rules).
//
//go:embed profiles.md
var Profiles string

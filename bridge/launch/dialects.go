package launch

import (
	"fmt"
	"os"

	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/hashicorp/hcl/v2"
)

// withProfiles adds the rule profiles shipped in the binary to m.
func withProfiles(m map[string]translate.Dialect) map[string]translate.Dialect {
	for _, d := range rules.Builtin(os.LookupEnv) {
		m[d.Name] = d
	}
	return m
}

// UserDialects are the configuration's dialect "name" { … } blocks that
// AddUserDialects compiled, kept for 'dialects show'.
var UserDialects = map[string]*config.UserDialect{}

// AddUserDialects compiles the configuration's dialect blocks into rule
// profiles and adds them to Dialects; diagnostics point into the file.
func AddUserDialects(cfg *config.Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, ud := range cfg.Dialects {
		if _, taken := Dialects()[ud.Name]; taken && UserDialects[ud.Name] == nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Dialect name taken",
				Detail:  fmt.Sprintf("%q is a dialect built into acp-bridge; give your profile another name.", ud.Name),
				Subject: ud.DeclRange.Ptr()})
			continue
		}
		p, moreDiags := rules.Decode(ud.Name, ud.Body)
		diags = append(diags, moreDiags...)
		if p == nil {
			continue
		}
		p.Env = os.LookupEnv
		Dialects()[ud.Name] = p.Dialect()
		UserDialects[ud.Name] = ud
	}
	return diags
}

// DialectKind says where a dialect comes from: "built-in" (Go), "profile"
// (a rule profile shipped in the binary) or "user" (the configuration).
func DialectKind(name string) string {
	if _, ok := rules.Source(name); ok {
		return "profile"
	}
	if UserDialects[name] != nil {
		return "user"
	}
	return "built-in"
}

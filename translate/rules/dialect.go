package rules

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/hashicorp/hcl/v2"

	"github.com/acp-bridge/acp-bridge/translate"
)

//go:embed profiles/*.hcl
var profileFiles embed.FS

// Dialect returns the profile as a dialect. Configure accepts no options
// block arguments and resolves the profile's env() variables through
// p.Env; a variable read without a default that is not set is an error.
func (p *Profile) Dialect() translate.Dialect {
	summary := p.Summary
	if summary == "" {
		summary = "rule profile " + p.Name
	}
	return translate.Dialect{
		Name:       p.Name,
		Summary:    summary,
		PerSession: p.PerSession,
		NoHistory:  p.NoHistory,
		Configure:  p.configure,
		Secrets:    p.secrets,
	}
}

// secrets returns the values the profile's env() calls read that are set:
// every one is a secret (an API key in a connect frame, most often), which
// the bridge scrubs from its logs, traces and errors.
func (p *Profile) secrets() []string {
	if p.Env == nil {
		return nil
	}
	var out []string
	for name := range p.envNames {
		if v, ok := p.Env(name); ok && v != "" {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func (p *Profile) configure(options hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if options != nil {
		var none struct{}
		diags = hcldecode.DecodeBody(options, nil, &none)
		if diags.HasErrors() {
			return nil, diags
		}
	}
	names := make([]string, 0, len(p.envNames))
	for name := range p.envNames {
		names = append(names, name)
	}
	sort.Strings(names)
	vars := map[string]string{}
	for _, name := range names {
		if p.Env != nil {
			if v, ok := p.Env(name); ok {
				vars[name] = v
				continue
			}
		}
		if p.envNames[name] {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Environment variable not set",
				Detail:   fmt.Sprintf("Profile %s reads the environment variable %s with env(%q), which is not set.", p.Name, name, name),
			})
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return func() translate.Translator { return newTranslator(p, vars) }, diags
}

// Profiles returns the profiles shipped in the binary, by name. env is
// given to each (see Profile.Env). A shipped profile that does not compile
// is a bug that the package's tests catch; it is left out.
func Profiles(env func(string) (string, bool)) []*Profile {
	entries, _ := profileFiles.ReadDir("profiles")
	var out []*Profile
	for _, e := range entries {
		name := path.Join("profiles", e.Name())
		src, err := profileFiles.ReadFile(name)
		if err != nil {
			continue
		}
		p, diags := Parse(name, src)
		if diags.HasErrors() {
			continue
		}
		p.Env = env
		out = append(out, p)
	}
	return out
}

// Builtin returns the shipped profiles as dialects, for main's table.
func Builtin(env func(string) (string, bool)) []translate.Dialect {
	var out []translate.Dialect
	for _, p := range Profiles(env) {
		out = append(out, p.Dialect())
	}
	return out
}

// Source returns the HCL text of the shipped profile name, for
// `acp-bridge dialects show`.
func Source(name string) ([]byte, bool) {
	if strings.ContainsAny(name, "/\\") {
		return nil, false
	}
	b, err := profileFiles.ReadFile(path.Join("profiles", name+".hcl"))
	return b, err == nil
}

package cli

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/translate/rules"
	"github.com/urfave/cli/v2"
)

// dialectsAction is `acp-bridge dialects`: the dialects this binary speaks,
// the configuration's own rule profiles among them.
func dialectsAction(c *cli.Context) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	if path, explicit := configPath(c); path != "" {
		// The configuration's own dialect blocks are listed too.
		if _, err := loadConfig(path, explicit, lineage{c}.String(flagProfile)); err != nil {
			return err
		}
	}
	if c.Bool("json") {
		return dialectsJSON(os.Stdout)
	}
	fmt.Fprintln(w, "NAME\tKIND\tLINKS\tSUMMARY")
	for _, name := range launch.DialectNames() {
		d := launch.Dialects()[name]
		links := "shared"
		if d.PerSession {
			links = "per-session"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.Name, launch.DialectKind(name), links, d.Summary)
	}
	return w.Flush()
}

// dialectsShowAction is `acp-bridge dialects show NAME`: a rule profile's HCL.
func dialectsShowAction(c *cli.Context) error {
	name := c.Args().First()
	if name == "" {
		return launch.Usagef("dialects show needs a dialect NAME")
	}
	if src, ok := rules.Source(name); ok {
		_, err := os.Stdout.Write(src)
		return err
	}
	if path, explicit := configPath(c); path != "" {
		if _, err := loadConfig(path, explicit, lineage{c}.String(flagProfile)); err != nil {
			return err
		}
	}
	if ud := launch.UserDialects[name]; ud != nil {
		_, err := fmt.Fprintf(os.Stdout, "# from %s\n%s\n", ud.DeclRange, ud.Source)
		return err
	}
	if _, ok := launch.Dialects()[name]; ok {
		return fmt.Errorf("dialect %s is built into acp-bridge in Go; only rule profiles have HCL to show", name)
	}
	return launch.UnknownDialect(name)
}

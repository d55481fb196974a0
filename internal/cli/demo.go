package cli

import (
	"os"

	"github.com/acp-bridge/acp-bridge/bridge/demo"
	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/urfave/cli/v2"
)

// demoAction is `acp-bridge demo`: a scripted session against a built-in
// legacy agent (package bridge/demo).
func demoAction(c *cli.Context) error {
	// The demo prints to stdout; its logs stay quiet on stderr unless asked.
	s, err := quietSettings(c)
	if err != nil {
		return err
	}
	logger, closeLog, err := launch.NewLogger(s)
	if err != nil {
		return err
	}
	defer closeLog.Close()
	return demo.Run(c.Context, demo.Options{
		Raw:      c.Bool("raw"),
		Out:      os.Stdout,
		Logger:   logger,
		Version:  versionString(),
		Progress: launch.NewProgress(os.Stderr),
	})
}

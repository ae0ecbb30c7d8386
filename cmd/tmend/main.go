// Command tmend repairs LLM-agent conversation transcripts whose tool calls and tool
// results are out of step, in files and pipes or where they are stored in Postgres.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tmend/tmend/cmd/tmend/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
)

type genOpts struct {
	dialect   string
	sessions  int
	messages  int
	faultRate float64
	faults    string
	maxFaults int
	seed      uint64
	text      string
	output    string

	cfg gen.Config
}

func (o *genOpts) Validate() error {
	d, err := repair.ParseDialect(o.dialect)
	if err != nil {
		return usageErrorf("--dialect: %v", err)
	}
	faults, err := gen.ParseFaults(o.faults)
	if err != nil {
		return usageErrorf("--faults: %v", err)
	}
	text, err := gen.ParseText(o.text)
	if err != nil {
		return usageErrorf("--text: %v", err)
	}
	switch {
	case o.sessions < 0:
		return usageErrorf("--sessions must not be negative")
	case o.messages < 4:
		return usageErrorf("--messages must be at least 4")
	case o.faultRate < 0 || o.faultRate > 1:
		return usageErrorf("--fault-rate must be between 0 and 1")
	case o.maxFaults < 1:
		return usageErrorf("--max-faults must be at least 1")
	}
	o.cfg = gen.Config{Seed: o.seed, Dialect: d, Sessions: o.sessions, Messages: o.messages,
		FaultRate: o.faultRate, Faults: faults, MaxFaults: o.maxFaults, Text: text}
	return nil
}

func newGenCmd(e *env) *cobra.Command {
	var o genOpts
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate realistic sessions with injected faults, as JSON Lines",
		Long: `Generate agent sessions (user asks, assistant calls tools, results come back) in any
dialect, with the faults tmend repairs injected into a share of them. The output depends
only on the flags: the same --seed gives the same bytes.

Faults: ` + fmt.Sprint(gen.Faults()),
		Example: `  tmend gen --dialect openclaw --sessions 20000 --messages 45 --fault-rate 1 > broken.jsonl
  tmend gen --dialect anthropic --faults misplaced_result,duplicate_result --max-faults 3 -o mix.jsonl
  tmend gen --text unicode --fault-rate 1 -o unicode.jsonl`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			w := e.stdout
			var af *outputFile
			if o.output != "" {
				var err error
				if af, err = createOutput(o.output); err != nil {
					return err
				}
				defer af.abort()
				w = af.f
			}
			err := gen.WriteJSONLines(cmd.Context(), w, o.cfg)
			if err == nil && af != nil {
				err = af.commit()
			}
			if err != nil {
				return fmt.Errorf("write sessions: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dialect, "dialect", string(repair.OpenClaw), "dialect to write: "+dialectNames())
	f.IntVar(&o.sessions, "sessions", 1000, "number of sessions")
	f.IntVar(&o.messages, "messages", 45, "mean messages per session (spread over half to one and a half times)")
	f.Float64Var(&o.faultRate, "fault-rate", 0.2, "share of sessions with faults, 0 to 1")
	f.StringVar(&o.faults, "faults", "all", "comma-separated fault kinds to draw from, or all")
	f.IntVar(&o.maxFaults, "max-faults", 2, "a broken session gets 1 to this many faults")
	f.Uint64Var(&o.seed, "seed", 1, "random seed")
	f.StringVar(&o.text, "text", string(gen.TextASCII), "vocabulary of message and result texts: ascii, or unicode (many scripts, emoji, raw U+2028/U+2029)")
	f.StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout (replaced atomically)")
	return cmd
}

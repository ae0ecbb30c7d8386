package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/repair/gen"
	"github.com/tmend/tmend/report"
)

// genOptions are the options of gen.
type genOptions struct {
	dialect, faults, text string
	output                string
	json                  bool
	workload              string
	cfg                   gen.Config
}

func (o *genOptions) load(*settings, []string) error {
	var err error
	if o.cfg.Dialect, err = repair.ParseDialect(o.dialect); err != nil {
		return fmt.Errorf("--dialect: %w", err)
	}
	if o.cfg.Faults, err = gen.ParseFaults(o.faults); err != nil {
		return fmt.Errorf("--faults: %w", err)
	}
	if o.cfg.Text, err = gen.ParseText(o.text); err != nil {
		return fmt.Errorf("--text: %w", err)
	}
	if o.cfg.Workload, err = gen.ParseWorkload(o.workload); err != nil {
		return fmt.Errorf("--workload: %w", err)
	}
	if vs := gen.Variants(o.cfg.Dialect); o.cfg.Variant != "" && !slices.Contains(vs, o.cfg.Variant) {
		if len(vs) == 0 {
			return fmt.Errorf("--variant: dialect %s has one shape", o.cfg.Dialect)
		}
		return fmt.Errorf("--variant: dialect %s has no variant %q (want one of %s)", o.cfg.Dialect, o.cfg.Variant,
			strings.Join(vs, ", "))
	}
	// Faults that never occur in the dialect are not drawn: asked for alone, they would
	// give clean sessions with no word of why.
	if !slices.ContainsFunc(o.cfg.Faults, func(f gen.Fault) bool { return gen.Applies(f, o.cfg.Dialect) }) {
		return fmt.Errorf("--faults %s: none of them occurs in dialect %s, so every session would be clean", o.faults, o.cfg.Dialect)
	}
	if o.cfg.OmitIDs && !gen.IDsOptional(o.cfg.Dialect) {
		return fmt.Errorf("--omit-ids: %s calls need ids", o.cfg.Dialect)
	}
	return nil
}

func (o *genOptions) Validate() error {
	c := o.cfg
	switch {
	case c.Sessions < 0:
		return errors.New("--sessions must not be negative")
	case c.Messages < 4:
		return errors.New("--messages must be at least 4")
	case c.FaultRate < 0 || c.FaultRate > 1:
		return errors.New("--fault-rate must be between 0 and 1")
	case c.MaxFaults < 1:
		return errors.New("--max-faults must be at least 1")
	}
	return nil
}

func newGenCmd(e *Env) *cobra.Command {
	o := &genOptions{}
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate realistic sessions with injected faults, as JSON Lines",
		Long: `Generate agent sessions (user asks, assistant calls tools, results come back) in any
dialect, with the faults tmend repairs injected into a share of them. The output depends
only on the flags: the same --seed gives the same bytes. --json writes a summary
object (sessions, broken, by_fault) to stderr, as fix does with its report, since
stdout may be the sessions.

Faults (--faults): ` + gen.FaultList() + ".",
		Example: `  tmend gen --dialect openclaw --sessions 20000 --messages 45 --fault-rate 1 > broken.jsonl
  tmend gen --dialect anthropic --faults misplaced_result,duplicate_result --max-faults 3 -o mix.jsonl
  tmend gen --text unicode --fault-rate 1 -o unicode.jsonl
  tmend gen --dialect gemini --omit-ids --fault-rate 1 -o idless.jsonl
  tmend gen --dialect langchain --variant lc-anthropic --fault-rate 0.5 -o langgraph.jsonl
  tmend gen --workload coding --messages 800 --fault-rate 0 -o long.jsonl`,
		Args: noArgs,
		RunE: runE(e, o, runGen),
	}
	f := cmd.Flags()
	f.StringVar(&o.dialect, "dialect", string(repair.OpenClaw), "dialect to write: "+dialectNames())
	f.IntVar(&o.cfg.Sessions, "sessions", 1000, "number of sessions")
	f.IntVar(&o.cfg.Messages, "messages", 45, "mean messages per session (spread over half to one and a half times)")
	f.Float64Var(&o.cfg.FaultRate, "fault-rate", 0.2, "share of sessions with faults, 0 to 1")
	f.StringVar(&o.faults, "faults", "all", "comma-separated fault kinds to draw from, or all")
	f.IntVar(&o.cfg.MaxFaults, "max-faults", 2, "a broken session gets 1 to this many faults")
	f.Uint64Var(&o.cfg.Seed, "seed", 1, "random seed")
	f.StringVar(&o.cfg.Variant, "variant", "", "stored shape, for a dialect with several (langchain: "+
		strings.Join(gen.Variants(repair.LangChain), ", ")+"); default: one drawn per session")
	f.StringVar(&o.text, "text", string(gen.TextASCII), "vocabulary of message and result texts: ascii, or unicode (many scripts, emoji, raw U+2028/U+2029)")
	f.StringVar(&o.workload, "workload", "plain", "tool traffic: plain (short made-up results), or coding (file reads, searches, writes with contents, long command logs, some failing: what compaction is measured on)")
	f.BoolVar(&o.cfg.OmitIDs, "omit-ids", false, "write calls and results without ids, as many SDKs do (gemini only: ids are optional there)")
	f.StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout (replaced atomically)")
	f.BoolVar(&o.json, "json", false, "write a summary of what was generated to stderr as a JSON object")
	return cmd
}

func runGen(ctx context.Context, e *Env, o *genOptions) error {
	w := e.Stdout
	var af *outputFile
	if o.output == "" {
		if err := e.checkStdout(); err != nil {
			return err
		}
	} else {
		var err error
		if af, err = createOutput(o.output); err != nil {
			return err
		}
		defer af.abort()
		w = af.f
	}
	sum, err := gen.WriteJSONLines(ctx, w, o.cfg)
	if err == nil && af != nil {
		err = af.commit()
	}
	if err != nil {
		return fmt.Errorf("write sessions: %w", err)
	}
	if o.json {
		// On stderr, as fix's report: stdout may be the sessions.
		return report.JSONLines(e.Stderr, []gen.Summary{sum})
	}
	return nil
}

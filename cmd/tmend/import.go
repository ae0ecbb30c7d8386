package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
)

func newImportCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Load JSON Lines sessions into tmend's own sessions table (for trials and demos)",
		Long: `Load sessions, one JSON object per line with "id", "updated_at" (optional) and
"messages" ("input", "contents"), into tmend's own sessions table, replacing sessions
with the same id. Output of 'tmend gen' fits. A user's own table is never written here.`,
		Example: `  tmend gen --dialect anthropic --sessions 5000 --fault-rate 0.1 | tmend import -`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSettings(e, cmd)
			if err != nil {
				return err
			}
			log, err := s.logger()
			if err != nil {
				return err
			}
			in, closeIn, err := openInput(e, args)
			if err != nil {
				return err
			}
			defer closeIn()
			pool, _, err := s.openDB(cmd.Context(), log)
			if err != nil {
				return err
			}
			defer pool.Close()
			sc := bufio.NewScanner(in)
			sc.Buffer(nil, 256<<20)
			var batch []model.Session
			total, line := 0, 0
			flush := func() error {
				n, err := store.Import(cmd.Context(), pool, batch)
				total += n
				batch = batch[:0]
				return err
			}
			for sc.Scan() {
				line++
				doc, err := repair.ParseDocument(sc.Bytes())
				if err != nil {
					return fmt.Errorf("line %d: %w", line, err)
				}
				if doc.ID == "" {
					return fmt.Errorf("line %d: session has no id", line)
				}
				batch = append(batch, model.Session{ID: doc.ID, Messages: append([]byte(nil), doc.Messages()...), UpdatedAt: doc.UpdatedAt})
				if len(batch) == 1000 {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			if err := flush(); err != nil {
				return err
			}
			e.printf("imported %d sessions\n", total)
			return nil
		},
	}
	registerDBFlags(cmd.Flags())
	return cmd
}

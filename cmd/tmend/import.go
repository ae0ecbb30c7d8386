package main

import (
	"github.com/spf13/cobra"

	"github.com/tmend/tmend/store"
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
			total, err := store.ImportJSONLines(cmd.Context(), pool, in)
			if err != nil {
				return err
			}
			e.printf("imported %d sessions\n", total)
			return nil
		},
	}
	registerDBFlags(cmd.Flags())
	return cmd
}

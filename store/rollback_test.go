package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store"
	"github.com/tmend/tmend/store/model"
	"github.com/tmend/tmend/store/storetest"
)

// brokenOddText is a broken transcript whose text a json or text column keeps as is:
// odd spacing, key order and number text that a round trip through jsonb would change.
const brokenOddText = `[ {"role":"user", "content":"n=1.50e3",  "z":1, "a":2},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]} ]`

// Rollback restores what a repair replaced byte for byte, whatever the id column's type
// (text, uuid, integer) and the messages column's type (jsonb, json, text).
func TestRollbackRestoresEveryColumnType(t *testing.T) {
	t.Parallel()
	ids := map[string]string{"text": "s-1", "uuid": "0b8e6f9c-3a52-4d1e-9a57-2f6f1f0c8d11", "bigint": "42", "integer": "7"}
	for _, idType := range []string{"text", "uuid", "bigint", "integer"} {
		for _, msgType := range []string{"jsonb", "json", "text"} {
			t.Run(fmt.Sprintf("ID%sMessages%s", idType, msgType), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				pool := storetest.NewDB(t)
				_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE public.convs (conv_id %s PRIMARY KEY, payload %s)`, idType, msgType))
				require.NoError(t, err)
				id := ids[idType]
				// Another row, so a restore that matched too much would show.
				other := map[string]string{"text": "s-2", "uuid": "1b8e6f9c-3a52-4d1e-9a57-2f6f1f0c8d11", "bigint": "43", "integer": "8"}[idType]
				_, err = pool.Exec(ctx, fmt.Sprintf(`INSERT INTO public.convs VALUES ($1::text::%[1]s, $2::text::%[2]s), ($3::text::%[1]s, $2::text::%[2]s)`,
					idType, msgType), id, brokenOddText, other)
				require.NoError(t, err)
				content := func(id string) string {
					var s string
					require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT payload::text FROM public.convs WHERE conv_id = $1::text::%s`, idType), id).Scan(&s))
					return s
				}
				before := content(id)

				st, err := store.Open(ctx, pool, store.Source{Table: "public.convs", IDColumn: "conv_id", MessagesColumn: "payload"}, false)
				require.NoError(t, err)
				page, err := st.Sessions(ctx, model.Query{Mode: model.ModeSession, SessionID: id, MaxBytes: 1 << 20})
				require.NoError(t, err)
				require.Len(t, page, 1)
				require.Equal(t, before, string(page[0].Messages))
				res, err := repair.Repair(page[0].Messages, repair.Options{})
				require.NoError(t, err)
				out, err := st.Apply(ctx, model.Apply{Trigger: model.TriggerCLI, Session: page[0], NewMessages: res.Messages,
					Report: model.Report{Status: model.StatusRepaired}})
				require.NoError(t, err)
				require.True(t, out.Applied)
				require.NotEqual(t, before, content(id))

				rb, err := st.Rollback(ctx, model.RollbackRequest{SessionID: id, Trigger: model.TriggerCLI})
				require.NoError(t, err)
				require.True(t, rb.Restored(), rb.Reason)
				require.Equal(t, before, content(id), "restored byte for byte")
				require.Equal(t, before, content(other), "the other row is untouched")

				// Rolling back the rollback restores the repair; --force over a change too.
				rb, err = st.Rollback(ctx, model.RollbackRequest{SessionID: id, Trigger: model.TriggerCLI})
				require.NoError(t, err)
				require.True(t, rb.Restored(), rb.Reason)
				require.Contains(t, content(id), repair.SyntheticResultText)
				_, err = pool.Exec(ctx, fmt.Sprintf(`UPDATE public.convs SET payload = $2::text::%s WHERE conv_id = $1::text::%s`, msgType, idType), id, `[]`)
				require.NoError(t, err)
				rb, err = st.Rollback(ctx, model.RollbackRequest{SessionID: id, To: 1, Force: true, Trigger: model.TriggerCLI})
				require.NoError(t, err)
				require.True(t, rb.Restored(), rb.Reason)
				require.Equal(t, before, content(id))
				require.Equal(t, before, content(other))
			})
		}
	}
}

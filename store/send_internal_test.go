package store

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// bindParts sends what pgproto3 would: the same Bind, Execute and Sync, a textArg's
// bytes as its parameter's text, not a copy of them.
func TestBindPartsIsTheBindMessage(t *testing.T) {
	big := []byte(`[{"role":"user","content":"x"}]`)
	sd := &pgconn.StatementDescription{ParamOIDs: []uint32{pgtype.TextOID, pgtype.JSONBOID, pgtype.Int4OID, pgtype.JSONOID, pgtype.TextArrayOID},
		Fields: []pgconn.FieldDescription{{DataTypeOID: pgtype.Int8OID}}}
	args := []any{"id", textArg(big), 7, nil, []string{"x", "y"}}
	var eqb pgx.ExtendedQueryBuilder
	require.NoError(t, eqb.Build(pgtype.NewMap(), sd, []any{"id", nil, 7, nil, []string{"x", "y"}}))
	bufs, err := bindParts(args, &eqb)
	require.NoError(t, err)
	var got []byte
	sent := false
	for _, b := range bufs {
		got = append(got, b...)
		sent = sent || len(b) > 0 && &b[0] == &big[0]
	}
	require.True(t, sent, "the textArg goes out from its own buffer")

	formats := append([]int16(nil), eqb.ParamFormats...)
	formats[1] = pgtype.TextFormatCode
	values := append([][]byte(nil), eqb.ParamValues...)
	values[1] = big
	want, err := (&pgproto3.Bind{ParameterFormatCodes: formats, Parameters: values, ResultFormatCodes: eqb.ResultFormats}).Encode(nil)
	require.NoError(t, err)
	want, _ = (&pgproto3.Execute{}).Encode(want)
	want, _ = (&pgproto3.Sync{}).Encode(want)
	require.Equal(t, want, got)
}

package store

import (
	"bytes"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

// bindParts sends what pgproto3 would: the same Bind, Execute and Sync, a textArg's
// buffers joined as its parameter's text, each sent from where it is, not a copy.
func TestBindPartsIsTheBindMessage(t *testing.T) {
	for _, big := range []textArg{
		{[]byte(`[{"role":"user","content":"x"}]`)},
		{[]byte(`[{"role":"user",`), []byte(`"content":"x"}`), nil, []byte(`,`), []byte(`{"role":"user","content":"y"}]`)},
	} {
		sd := &pgconn.StatementDescription{ParamOIDs: []uint32{pgtype.TextOID, pgtype.JSONBOID, pgtype.Int4OID, pgtype.JSONOID, pgtype.TextArrayOID},
			Fields: []pgconn.FieldDescription{{DataTypeOID: pgtype.Int8OID}}}
		args := []any{"id", big, 7, nil, []string{"x", "y"}}
		var eqb pgx.ExtendedQueryBuilder
		require.NoError(t, eqb.Build(pgtype.NewMap(), sd, []any{"id", nil, 7, nil, []string{"x", "y"}}))
		parts, err := bindParts(args, &eqb)
		require.NoError(t, err)
		var got bytes.Buffer
		require.NoError(t, writeParts(&got, parts))
		sent := map[*byte]bool{}
		for _, p := range parts {
			for _, b := range p {
				if len(b) > 0 {
					sent[&b[0]] = true
				}
			}
		}
		for _, b := range big {
			require.True(t, len(b) == 0 || sent[&b[0]], "a textArg's buffer goes out from where it is")
		}

		formats := append([]int16(nil), eqb.ParamFormats...)
		formats[1] = pgtype.TextFormatCode
		values := append([][]byte(nil), eqb.ParamValues...)
		values[1] = bytes.Join(big, nil)
		want, err := (&pgproto3.Bind{ParameterFormatCodes: formats, Parameters: values, ResultFormatCodes: eqb.ResultFormats}).Encode(nil)
		require.NoError(t, err)
		want, _ = (&pgproto3.Execute{}).Encode(want)
		want, _ = (&pgproto3.Sync{}).Encode(want)
		require.Equal(t, want, got.Bytes())
	}
}

// writeParts writes every buffer in order, any number of them, and leaves the lists it
// was given as they were: a write retried sends the same pieces again.
func TestWritePartsLeavesThePartsAlone(t *testing.T) {
	var pieces [][]byte
	var want []byte
	for i := range 3000 {
		b := []byte{byte('a' + i%26)}
		pieces, want = append(pieces, b), append(want, b...)
	}
	parts := [][][]byte{{[]byte("<")}, pieces, {[]byte(">")}}
	kept := slices.Clone(pieces)
	for range 2 {
		var got bytes.Buffer
		require.NoError(t, writeParts(&got, parts))
		require.Equal(t, "<"+string(want)+">", got.String())
		require.Equal(t, kept, pieces)
	}
}

// A Bind message over what PostgreSQL takes (PQ_LARGE_MESSAGE_LIMIT, pgproto3's limit
// too) is refused before anything is sent, however its pieces add up.
func TestBindPartsRefusesOver1GiB(t *testing.T) {
	mib := make([]byte, 1<<20)
	sd := &pgconn.StatementDescription{ParamOIDs: []uint32{pgtype.TextOID, pgtype.JSONBOID}}
	var eqb pgx.ExtendedQueryBuilder
	require.NoError(t, eqb.Build(pgtype.NewMap(), sd, []any{"id", nil}))
	for _, n := range []int{1023, 1024} {
		big := make(textArg, n)
		for i := range big {
			big[i] = mib
		}
		_, err := bindParts([]any{"id", big}, &eqb)
		if n == 1023 {
			require.NoError(t, err)
		} else {
			require.ErrorContains(t, err, "over 1 GiB")
		}
	}
}

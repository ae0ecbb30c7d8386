package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tmend/tmend/store/model"
)

// textArg is a statement's argument that is written to the connection straight from its
// buffers, joined, as the parameter's text form (its parameter must be text or JSON).
// pgx would encode a []byte into its parameter buffer and copy that into the Bind
// message, each grown by append: for a session of tens of megabytes, up to four more
// copies of it, two of them live at once with the session and its repair (BENCHMARKS.md,
// "A writing scan's copies"). Several buffers are a repair in pieces (Apply.NewPieces),
// never joined (BENCHMARKS.md, "A writing scan sends a repair in pieces").
type textArg [][]byte

// sendArg is a's repaired content as a write's argument: its pieces, or NewMessages as
// a textArg over sendBackMax, where the copies cost more than execDirect's round trip.
func sendArg(a model.Apply) any {
	switch {
	case a.NewPieces != nil:
		return textArg(a.NewPieces)
	case len(a.NewMessages) > sendBackMax:
		return textArg{a.NewMessages}
	}
	return a.NewMessages
}

func hasTextArg(q *pgx.QueuedQuery) bool {
	return slices.ContainsFunc(q.Arguments, func(a any) bool { _, ok := a.(textArg); return ok })
}

// sendCounted runs b's statements, each of which must change the rows counts says (-1:
// any number). A statement with a textArg goes alone by execDirect, those around it in
// batches.
func sendCounted(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, counts []int64) error {
	qs := b.QueuedQueries
	for len(qs) > 0 {
		i := slices.IndexFunc(qs, hasTextArg)
		if i < 0 {
			i = len(qs)
		}
		if i > 0 {
			if err := batchCounted(ctx, conn, &pgx.Batch{QueuedQueries: qs[:i]}, counts[:min(i, len(counts))]); err != nil {
				return err
			}
		}
		if i == len(qs) {
			return nil
		}
		tag, err := execDirect(ctx, conn.Conn(), qs[i].SQL, qs[i].Arguments...)
		if err == nil && i < len(counts) {
			err = checkCount(tag, counts[i])
		}
		if err != nil {
			return err
		}
		qs, counts = qs[i+1:], counts[min(i+1, len(counts)):]
	}
	return nil
}

func batchCounted(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, counts []int64) error {
	br := conn.SendBatch(ctx, b)
	var err error
	for _, n := range counts {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err != nil {
			break
		}
		if err = checkCount(tag, n); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkCount: the rows are locked and matched, so every statement finds its rows unless
// something on the table (a trigger, a policy) changed the statement's effect.
func checkCount(tag pgconn.CommandTag, n int64) error {
	if n >= 0 && tag.RowsAffected() != n {
		return &sessionError{fmt.Errorf("%s changed %d rows, not %d; nothing written", tag, tag.RowsAffected(), n)}
	}
	return nil
}

// textOIDs are the parameter types whose text form a textArg is.
var textOIDs = []uint32{pgtype.TextOID, pgtype.VarcharOID, pgtype.JSONOID, pgtype.JSONBOID}

// execDirect runs one statement as conn.Exec would, but writes its textArg arguments to
// the connection from their own buffers (writeParts: writev, no copy). It costs a
// round trip more than Exec: the statement is parsed unnamed first, for its parameter
// types. A connection left in the middle of the exchange (a write or read that failed,
// ctx's end) is closed, so that the pool drops it and the server rolls back.
func execDirect(ctx context.Context, conn *pgx.Conn, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	pc := conn.PgConn()
	sd, err := pc.Prepare(ctx, "", sql, nil)
	if err != nil {
		return tag, err
	}
	plain := slices.Clone(args)
	for i, a := range args {
		if _, ok := a.(textArg); ok {
			if i >= len(sd.ParamOIDs) || !slices.Contains(textOIDs, sd.ParamOIDs[i]) {
				return tag, fmt.Errorf("parameter $%d is not text or JSON", i+1)
			}
			plain[i] = nil // its slot; sent below
		}
	}
	var eqb pgx.ExtendedQueryBuilder
	if err := eqb.Build(conn.TypeMap(), sd, plain); err != nil {
		return tag, err
	}
	parts, err := bindParts(args, &eqb)
	if err != nil {
		return tag, err
	}

	if err := pc.SyncConn(ctx); err != nil {
		return tag, err
	}
	synced := false
	defer func() {
		if !synced {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	nc := pc.Conn()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetWriteDeadline(time.Now()) })
	err = writeParts(nc, parts)
	if !stop() {
		err = errors.Join(err, context.Cause(ctx))
	}
	if err != nil {
		return tag, fmt.Errorf("send statement: %w", err)
	}
	var pgErr error
	for !synced {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return tag, err
		}
		switch msg := msg.(type) {
		case *pgproto3.CommandComplete:
			tag = pgconn.NewCommandTag(string(msg.CommandTag))
		case *pgproto3.ErrorResponse:
			pgErr = pgconn.ErrorResponseToPgError(msg)
		case *pgproto3.ReadyForQuery:
			synced = true
		}
	}
	return tag, pgErr
}

// bindParts is the Bind message of args for the unnamed statement (eqb built for it, a
// textArg's slot NULL), cut around each textArg's bytes, then Execute and Sync: the
// buffers to write, in order, as parts (a textArg is one part, its own list, not copied).
func bindParts(args []any, eqb *pgx.ExtendedQueryBuilder) ([][][]byte, error) {
	buf := []byte{'B', 0, 0, 0, 0, 0, 0} // its length, set below; unnamed portal and statement
	buf = be16(buf, len(args))
	for i, a := range args {
		f := eqb.ParamFormats[i]
		if _, ok := a.(textArg); ok {
			f = pgtype.TextFormatCode
		}
		buf = be16(buf, int(f))
	}
	buf = be16(buf, len(args))
	var parts [][][]byte
	for i, a := range args {
		if t, ok := a.(textArg); ok {
			n := 0
			for _, b := range t {
				n += len(b)
			}
			parts = append(parts, [][]byte{be32(buf, n)}, t)
			buf = nil
		} else if v := eqb.ParamValues[i]; v == nil {
			buf = be32(buf, -1)
		} else {
			buf = append(be32(buf, len(v)), v...)
		}
	}
	buf = be16(buf, len(eqb.ResultFormats))
	for _, f := range eqb.ResultFormats {
		buf = be16(buf, int(f))
	}
	parts = append(parts, [][]byte{buf})
	size := -1 // the type byte
	for _, p := range parts {
		for _, b := range p {
			size += len(b)
		}
	}
	if size > maxBody {
		return nil, errors.New("statement's parameters are over 1 GiB")
	}
	be32(parts[0][0][:1], size)
	buf, err := (&pgproto3.Execute{}).Encode(buf)
	if err == nil {
		buf, err = (&pgproto3.Sync{}).Encode(buf)
	}
	if err != nil {
		return nil, err
	}
	parts[len(parts)-1][0] = buf
	return parts, nil
}

// writeParts writes parts' buffers to w in order, with one writev for up to maxIOV of
// them, from a list of its own: net.Buffers consumes the list it writes, and a copy of
// all of a textArg's (a repair of a million blocks in jsonb's text is a quarter of a
// million pieces, 24 bytes each) was megabytes more at the peak.
func writeParts(w io.Writer, parts [][][]byte) error {
	chunk := make([][]byte, 0, maxIOV)
	flush := func() error {
		bufs := net.Buffers(chunk)
		_, err := bufs.WriteTo(w)
		clear(chunk)
		chunk = chunk[:0]
		return err
	}
	for _, p := range parts {
		for _, b := range p {
			if chunk = append(chunk, b); len(chunk) == maxIOV {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// maxIOV is the most buffers one writev takes (Linux's IOV_MAX).
const maxIOV = 1024

// maxBody is the longest message body pgproto3 sends and PostgreSQL takes
// (PQ_LARGE_MESSAGE_LIMIT), its length field included.
const maxBody = 0x3fffffff - 1

func be16(b []byte, n int) []byte { return append(b, byte(n>>8), byte(n)) }

func be32(b []byte, n int) []byte { return append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n)) }

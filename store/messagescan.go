package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tmend/tmend/store/model"
)

// A full run's page, and a session read alone, are read as one ordered range scan of
// the rows, in (session, order, key) order as the (session, order) index gives them,
// and assembled into sessions here: a COPY of the rows costs about as much. A scan
// takes a number of rows; the last session it returns may be cut by that limit, so it
// is dropped and the next scan starts at it, and a session with more rows than a scan
// takes is read alone: each session comes whole from one statement. An incremental
// run's page is one statement that picks the page's sessions by their changed rows and
// returns the rows of those sessions whole, in the same order, assembled alike (sorting
// and sizing them in window functions instead took three times as long). The holds are
// read after the rows (a rollback that commits in between then holds what the page did
// not read, and Apply finds the session changed), and only when the source has any,
// which the first statement asks in its round trip: a page is one round trip.

// pageRows is the number of rows a scan takes to complete need sessions, from the mean
// rows per session seen (1/1024ths): a little more than that, so that one scan usually
// completes the page.
func pageRows(need int, mean int64) int64 {
	if mean <= 0 {
		mean = 16 << 10
	}
	n := int64(need)
	return max(n*mean>>10+n/8+8, 16)
}

// scanPage reads a page: a full run's by range scans, an incremental run's by the
// sessions of its window, or with q.Mode ModeSession one session.
func (l *messageLayout) scanPage(ctx context.Context, q model.Query) ([]model.Session, error) {
	if q.Limit <= 0 && q.Mode != model.ModeSession {
		return nil, nil
	}
	p := pageAssembler{maxBytes: int64(q.MaxBytes), pageBytes: int64(q.PageBytes), limit: q.Limit, noRows: q.NoRows}
	if p.pageBytes <= 0 {
		p.pageBytes = math.MaxInt64
	}
	var err error
	switch q.Mode {
	case model.ModeSession:
		p.limit = 1
		p.pageBytes = math.MaxInt64
		err = l.readAlone(ctx, &p, q.SessionID, true)
	case model.ModeIncremental:
		err = l.readChanged(ctx, &p, q)
	default:
		err = l.scanRange(ctx, &p, q)
	}
	if err != nil {
		return nil, err
	}
	if p.held && len(p.out) > 0 {
		if err := l.readHolds(ctx, p.out); err != nil {
			return nil, err
		}
	}
	return p.out, nil
}

// scanRange fills the page by range scans from q.After within q.Slice.
func (l *messageLayout) scanRange(ctx context.Context, p *pageAssembler, q model.Query) error {
	variant, bounds := sliceBounds(q.Slice)
	after, started := q.After.ID, q.After.Started
	for first := true; !p.full(); first = false {
		limit := pageRows(p.limit-len(p.out), l.meanRows.Load())
		var args []any
		sql := l.sql.scan[variant]
		if started {
			sql, args = l.sql.scanAfter[variant], []any{after}
		}
		before := len(p.out)
		n, err := l.readRows(ctx, p, first, sql, append(append(args, bounds...), limit)...)
		if err != nil {
			return err
		}
		l.learn(p)
		if len(p.out) > before {
			after, started = p.out[len(p.out)-1].ID, true
		}
		switch {
		case n < limit || p.full():
			// The range's end, the last session whole; or the page is done.
			if !p.full() {
				return p.end()
			}
			return nil
		case len(p.out) == before:
			// One session took every row of the scan: read it alone.
			id := p.cur.id
			p.drop()
			if err := l.readAlone(ctx, p, id, false); err != nil {
				return err
			}
			after, started = id, true
		default:
			p.drop() // the last session, which the limit may have cut: the next scan starts at it
		}
	}
	return nil
}

// readChanged fills an incremental run's page from q.After within q.Slice: the
// statement picks at most the page's sessions and returns their rows whole.
func (l *messageLayout) readChanged(ctx context.Context, p *pageAssembler, q model.Query) error {
	variant, bounds := sliceBounds(q.Slice)
	sql, args := l.sql.incr[variant], []any{q.Limit, q.From, q.To}
	if l.marked() {
		args = []any{q.Limit, l.t.key, q.From}
	}
	if q.After.Started {
		sql, args = l.sql.incrAfter[variant], append(args, q.After.ID)
	}
	if _, err := l.readRows(ctx, p, true, sql, append(args, bounds...)...); err != nil {
		return err
	}
	return p.end()
}

// readAlone reads one session's rows whole.
func (l *messageLayout) readAlone(ctx context.Context, p *pageAssembler, id string, first bool) error {
	if _, err := l.readRows(ctx, p, first, l.sql.alone, id); err != nil {
		return err
	}
	return p.end()
}

// readRows reads the rows a statement returns into p, and returns how many it read. The
// page's first statement also asks, after it, whether the source has holds (p.held).
func (l *messageLayout) readRows(ctx context.Context, p *pageAssembler, first bool, sql string, args ...any) (n int64, err error) {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	if first {
		b.Queue(l.sql.anyHolds, l.t.key)
	}
	br := l.pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	if n, err = p.read(rows); err != nil || !first {
		return n, err
	}
	return n, br.QueryRow().Scan(&p.held)
}

// learn keeps the mean rows per session seen, for the next scans' limits.
func (l *messageLayout) learn(p *pageAssembler) {
	if p.sessions > 0 {
		l.meanRows.Store(p.rows << 10 / p.sessions)
	}
}

// readHolds sets the page's sessions' HoldHash, in one statement.
func (l *messageLayout) readHolds(ctx context.Context, page []model.Session) error {
	ids := make([]string, len(page))
	at := make(map[string]int, len(page))
	for i, s := range page {
		ids[i], at[s.ID] = s.ID, i
	}
	rows, err := l.pool.Query(ctx, l.sql.holds, l.t.key, ids)
	if err != nil {
		return err
	}
	var id, hash string
	_, err = pgx.ForEachRow(rows, []any{&id, &hash}, func() error {
		page[at[id]].HoldHash = hash
		return nil
	})
	return err
}

// pageAssembler makes sessions of rows in (session, order, key) order: a session over
// maxBytes, or with a NULL message, comes without content and counts nothing; one whose content
// takes the page's content over pageBytes comes without it (Deferred) and ends the page.
type pageAssembler struct {
	maxBytes, pageBytes int64
	limit               int
	noRows              bool // the sessions come without their Rows
	out                 []model.Session
	cum                 int64 // the content of the page so far
	ended               bool  // a deferred session ended the page
	held                bool  // the source has holds
	cur                 sessionRows
	// rows and sessions count what the page's finished sessions held.
	rows, sessions int64
	typeMap        *pgtype.Map
	uaFormat       int16
}

// sessionRows is the session being read: its content is kept while it may still be
// returned with it.
type sessionRows struct {
	id    string
	open  bool // it has rows
	rows  int64
	bytes int64 // of its messages
	null  bool
	keep  bool
	buf   bytes.Buffer // '[' and the messages so far
	keys  []byte       // the rows' keys, one after another
	ends  []int32      // where each key ends in keys
	ords  []int64
	xmins []uint32
	// Its latest change: the value as read, and as a number that orders it.
	ua    []byte
	uaKey int64
}

func (p *pageAssembler) full() bool { return p.ended || len(p.out) >= p.limit }

// read assembles rows (session id, key, order, message, xmin, and the latest change when
// the source has one) into the page, each session finished when the next one starts;
// the last one is left for end or drop. It stops once the page is full, and returns the
// rows it read.
func (p *pageAssembler) read(rows pgx.Rows) (int64, error) {
	defer rows.Close()
	if p.typeMap == nil {
		p.typeMap = rows.Conn().TypeMap()
	}
	fd := rows.FieldDescriptions()
	var n int64
	for rows.Next() {
		n++
		v := rows.RawValues()
		if !p.cur.open || p.cur.id != string(v[0]) {
			if p.cur.open {
				if err := p.end(); err != nil {
					return n, err
				}
				if p.full() {
					return n, nil
				}
			}
			p.start(string(v[0]))
		}
		if err := p.add(fd, v); err != nil {
			return n, err
		}
	}
	return n, rows.Err()
}

func (p *pageAssembler) start(id string) {
	c := &p.cur
	c.id, c.open, c.rows, c.bytes, c.null, c.keep = id, true, 0, 0, false, true
	c.buf.Reset()
	c.buf.WriteByte('[')
	c.keys, c.ends, c.ords, c.xmins = c.keys[:0], c.ends[:0], c.ords[:0], c.xmins[:0]
	c.ua = c.ua[:0]
}

// add takes one row of the current session.
func (p *pageAssembler) add(fd []pgconn.FieldDescription, v [][]byte) error {
	c := &p.cur
	c.rows++
	if v[3] == nil {
		c.null = true
	} else {
		c.bytes += int64(len(v[3]))
	}
	if len(v) > 5 && v[5] != nil {
		k, err := p.timeKey(fd[5], v[5])
		if err != nil {
			return fmt.Errorf("session %q: %w", c.id, err)
		}
		if len(c.ua) == 0 || k > c.uaKey {
			c.ua, c.uaKey = append(c.ua[:0], v[5]...), k
		}
	}
	// The content is kept only while the session may still come with it.
	if c.keep && (c.null || c.bytes+c.rows+1 > p.maxBytes || p.cum+c.bytes+c.rows+1 > p.pageBytes) {
		c.keep = false
	}
	if !c.keep {
		return nil
	}
	if c.rows > 1 {
		c.buf.WriteByte(',')
	}
	c.buf.Write(v[3])
	if p.noRows {
		return nil
	}
	ord, err := int8Value(fd[2], v[2])
	if err != nil {
		return fmt.Errorf("session %q: order: %w", c.id, err)
	}
	xmin, err := xidValue(fd[4], v[4])
	if err != nil {
		return fmt.Errorf("session %q: xmin: %w", c.id, err)
	}
	c.keys = push(c.keys, v[1]...)
	c.ends = push(c.ends, int32(len(c.keys)))
	c.ords = push(c.ords, ord)
	c.xmins = push(c.xmins, xmin)
	return nil
}

// end finishes the current session and adds it to the page.
func (p *pageAssembler) end() error {
	c := &p.cur
	if !c.open {
		return nil
	}
	size := c.bytes + c.rows + 1
	counted := size
	if c.null || size > p.maxBytes {
		counted = 0
	}
	p.cum += counted
	s := model.Session{ID: c.id, Size: int(size), Null: c.null}
	if len(c.ua) > 0 {
		if err := p.typeMap.Scan(pgtype.TimestamptzOID, p.uaFormat, c.ua, &s.UpdatedAt); err != nil {
			return fmt.Errorf("session %q: %w", c.id, err)
		}
		s.Position = s.UpdatedAt
	}
	switch {
	case counted > 0 && p.cum > p.pageBytes:
		s.Deferred, p.ended = true, true
	case counted > 0:
		c.buf.WriteByte(']')
		s.Messages = bytes.Clone(c.buf.Bytes())
		if p.noRows {
			break
		}
		// Copied at their length: the arrays grew by doubling, and are reused.
		s.Rows = model.NewRows(string(c.keys), slices.Clone(c.ends), slices.Clone(c.ords), slices.Clone(c.xmins))
	}
	if p.out == nil {
		p.out = make([]model.Session, 0, min(p.limit, 4096)) // the page's sessions, not regrown
	}
	p.out = append(p.out, s)
	p.rows += c.rows
	p.sessions++
	c.open = false
	return nil
}

// drop forgets the current session, which the next scan reads again.
func (p *pageAssembler) drop() { p.cur.open = false }

// timeKey orders timestamptz values: microseconds since 2000 as the binary format
// has them, infinities at the ends.
func (p *pageAssembler) timeKey(fd pgconn.FieldDescription, v []byte) (int64, error) {
	p.uaFormat = fd.Format
	if fd.Format == pgtype.BinaryFormatCode && len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	var t pgtype.Timestamptz
	if err := p.typeMap.Scan(fd.DataTypeOID, fd.Format, v, &t); err != nil {
		return 0, err
	}
	switch t.InfinityModifier {
	case pgtype.Infinity:
		return math.MaxInt64, nil
	case pgtype.NegativeInfinity:
		return math.MinInt64, nil
	}
	return t.Time.UnixMicro(), nil
}

// int8Value decodes an int8 column's value in either format.
func int8Value(fd pgconn.FieldDescription, v []byte) (int64, error) {
	if fd.Format == pgtype.BinaryFormatCode {
		if len(v) != 8 {
			return 0, fmt.Errorf("int8 of %d bytes", len(v))
		}
		return int64(binary.BigEndian.Uint64(v)), nil
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// xidValue decodes an xid column's value in either format.
func xidValue(fd pgconn.FieldDescription, v []byte) (uint32, error) {
	if fd.Format == pgtype.BinaryFormatCode {
		if len(v) != 4 {
			return 0, fmt.Errorf("xid of %d bytes", len(v))
		}
		return binary.BigEndian.Uint32(v), nil
	}
	x, err := strconv.ParseUint(string(v), 10, 32)
	return uint32(x), err
}

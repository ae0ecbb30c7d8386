package files

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/tmend/tmend/repair"
)

// looksLikeSessionFile reports whether the input's first line is a session file's
// header ({"type":"session",...}).
func looksLikeSessionFile(br *bufio.Reader) bool {
	for n := max(br.Buffered(), 4096); ; n = min(n*2, br.Size()) {
		b, err := br.Peek(n)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return IsSessionHeader(b[:i])
		}
		if err != nil || n == br.Size() {
			return IsSessionHeader(b)
		}
	}
}

// sessionFileRecord checks or repairs a whole session file: its entries form one tree,
// so it is read whole (up to the size limit) and reported as one session.
func sessionFileRecord(cfg streamConfig, br *bufio.Reader, opts repair.Options) error {
	data, err := io.ReadAll(io.LimitReader(br, cfg.maxBytes+1))
	if err != nil {
		return fmt.Errorf("read input: %w", err)
	}
	if int64(len(data)) > cfg.maxBytes {
		r := &fileRecord{tooLarge: true, size: int64(len(data))}
		if cfg.out != nil {
			if _, err := cfg.out.Write(data); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			if _, err := io.Copy(cfg.out, br); err != nil {
				return fmt.Errorf("copy input: %w", err)
			}
		}
		return cfg.emit(r)
	}
	out, s, info := sessionFile(data, opts, cfg.out != nil)
	s.OffPath, s.Branches, s.CutOffLine = info.OffPath, info.Branches, info.CutOff
	if cfg.out != nil {
		if out == nil {
			out = data
		}
		if _, err := cfg.out.Write(out); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	return cfg.emit(&fileRecord{line: 1, outcome: s})
}

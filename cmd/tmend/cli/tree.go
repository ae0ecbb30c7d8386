package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/tmend/tmend/files"
	"github.com/tmend/tmend/report"
	"github.com/tmend/tmend/store/model"
)

// treeFile is what check or fix --in-place made of one file.
type treeFile struct {
	path     string
	sessions []*report.Session
	res      files.Result
	size     int64
	backup   string // where the prior file was kept, when it was rewritten
	err      error
}

// collect is a report.Handler that keeps a file's sessions for the walk's report.
type collect struct{ f *treeFile }

func (c collect) Session(s *report.Session) error {
	s.File = c.f.path
	c.f.sessions = append(c.f.sessions, s)
	return nil
}
func (c collect) Summary(*report.Summary) error { return nil }

// runTree is check DIR, fix --in-place FILE and fix --in-place DIR: each file is
// checked, or repaired and, when something changed, replaced atomically with the prior
// file kept beside it. Files run in parallel, up to --workers at once.
func runTree(ctx context.Context, e *Env, o *fileOptions) (err error) {
	fix := o.files.Fix
	paths, skipped, err := treeFiles(o.input)
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	found := make([]*treeFile, len(paths))
	var progress *termProgress
	if isTerminal(e.Stderr) {
		progress = &termProgress{w: e.Stderr, throttle: 100 * time.Millisecond}
		progress.start("files", int64(len(paths)), false, "files")
		defer progress.stop()
	}
	var mu sync.Mutex
	done := int64(0)
	stamp := o.engine.repair.Now.UTC().Format("20060102T150405Z")
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.files.Workers)
	opts := o.files
	opts.Workers = 1 // the files are the parallel work
	for i, p := range paths {
		f := &treeFile{path: p}
		found[i] = f
		g.Go(func() error {
			f.err = treeOne(gctx, f, opts, fix, stamp)
			if progress != nil {
				mu.Lock()
				done++
				progress.set(done)
				mu.Unlock()
			}
			return gctx.Err()
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if progress != nil {
		progress.stop()
	}

	reportTo := e.Stdout
	if fix {
		reportTo = e.Stderr
	}
	handlers, finish, err := o.handlers(reportTo, fix)
	if err != nil {
		return err
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		if ferr := finish(); ferr != nil && (err == nil || err == errProblems) {
			err = ferr
		}
	}()
	var sum report.Summary
	sum.Type = "summary"
	sum.FilesSkipped, sum.InPlace = skipped, fix
	var broken, failed int
	var failures []string
	for _, f := range found {
		sum.Files++
		sum.Bytes += f.size
		if f.err != nil {
			failed++
			failures = append(failures, fmt.Sprintf("%s: %v", f.path, f.err))
			s := &report.Session{File: f.path, Status: model.StatusFailed, Reason: f.err.Error()}
			f.sessions = []*report.Session{s}
		}
		if f.backup != "" {
			sum.FilesRewritten++
			for _, s := range f.sessions {
				s.Backup = f.backup
			}
		}
		broken += f.res.Broken
		failed += f.res.Failed
		for _, s := range f.sessions {
			sum.Add(s)
			for _, h := range handlers {
				if err := h.Session(s); err != nil {
					return fmt.Errorf("write report: %w", err)
				}
			}
		}
	}
	for _, h := range handlers {
		if err := h.Summary(&sum); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	finished = true
	if err := finish(); err != nil {
		return err
	}
	if fix && !o.json {
		for _, f := range found {
			if f.backup != "" {
				fmt.Fprintf(e.Stderr, "repaired %s (the prior file is kept as %s)\n", f.path, f.backup)
			}
		}
	}
	switch {
	case len(failures) > 0:
		// One line: the message is printed escaped, so a line break would show as \n.
		return fmt.Errorf("%d files could not be processed: %s", len(failures), strings.Join(failures, "; "))
	case failed > 0:
		return fmt.Errorf("%d sessions could not be processed (see the report)", failed)
	case broken > 0:
		return errProblems
	}
	return nil
}

// treeFiles lists the files to process: root itself when it is a file, else every
// *.jsonl file under it (the name pi and OpenClaw give session files). Symlinks are
// skipped (counted): a target inside the tree is walked anyway, one outside is not
// tmend's to change, and a rename would replace the link. tmend's backups and temp files
// do not end in .jsonl. A tree of files none of which is named *.jsonl is an error, not
// an empty all-clear: its transcripts (say *.json) were never read.
func treeFiles(root string) (paths []string, skipped int, err error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, 0, fmt.Errorf("open input: %w", err)
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return nil, 0, fmt.Errorf("%s is not a regular file: --in-place rewrites files only", root)
		}
		return []string{root}, 0, nil
	}
	others := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if strings.HasSuffix(p, ".jsonl") {
				skipped++
			}
		case d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".jsonl"):
			paths = append(paths, p)
		case d.Type().IsRegular():
			others++
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("walk %s: %w", root, err)
	}
	if len(paths) == 0 && others > 0 {
		return nil, 0, fmt.Errorf("no *.jsonl file under %s, only %d other file(s): a directory is read for session files named *.jsonl; give a transcript file by name (tmend check FILE)", root, others)
	}
	sort.Strings(paths)
	return paths, skipped, nil
}

// treeOne checks or repairs one file. A repair is written to a temp file beside it,
// synced, and renamed over it after the prior file is linked (or copied) to its backup
// name; a file that changed while tmend read it is left as it is.
func treeOne(ctx context.Context, f *treeFile, opts files.Options, fix bool, stamp string) error {
	in, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer in.Close()
	before, err := in.Stat()
	if err != nil {
		return err
	}
	f.size = before.Size()
	if !fix {
		f.res, err = files.Run(ctx, in, nil, opts, collect{f})
		return err
	}
	dir, base := filepath.Split(f.path)
	tmp, err := os.CreateTemp(dir, "."+base+".tmend-*.tmp")
	if err != nil {
		return fmt.Errorf("create a temp file beside it: %w", err)
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }() // gone after the rename
	if f.res, err = files.Run(ctx, in, tmp, opts, collect{f}); err != nil {
		return err
	}
	if f.res.Summary.ByStatus[model.StatusRepaired] == 0 {
		return nil // nothing changed: the file stays as it is
	}
	if err := tmp.Chmod(before.Mode().Perm()); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	now, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	if now.Size() != before.Size() || !now.ModTime().Equal(before.ModTime()) {
		f.res = files.Result{}
		for _, s := range f.sessions {
			if s.Status == model.StatusRepaired {
				s.Status, s.Reason = model.StatusConflict, "the file changed while tmend read it (is an agent writing it?); left unchanged, run fix again"
			}
		}
		return nil
	}
	// A second fix within the same second gets the next free name: a backup is never
	// replaced.
	backup := f.path + ".tmend-" + stamp + ".bak"
	for n := 2; ; n++ {
		err := keepBackup(f.path, backup)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || n > 1000 {
			return fmt.Errorf("keep the prior file as %s: %w", backup, err)
		}
		backup = fmt.Sprintf("%s.tmend-%s-%d.bak", f.path, stamp, n)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return err
	}
	f.backup = backup
	return syncDir(dir)
}

// keepBackup makes backup a hard link to path (the prior bytes, no copy), or a synced
// copy where the file system has no links. An existing backup is never replaced.
func keepBackup(path, backup string) error {
	if err := os.Link(path, backup); err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(backup, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		_ = dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		return err
	}
	return dst.Close()
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return path != "" && path != "-" && err == nil && fi.IsDir()
}

// handlers are the walk's report handlers, as for a single input: text or JSON to w, and
// the JSON report file. finish flushes them and commits the report file.
func (o *fileOptions) handlers(w io.Writer, fix bool) ([]report.Handler, func() error, error) {
	rbuf := bufio.NewWriter(w)
	var hs []report.Handler
	if o.json {
		hs = append(hs, report.NewJSON(rbuf))
	} else {
		detail := report.ProblemLines
		if o.verbose {
			detail = report.EveryAction
		}
		hs = append(hs, report.NewText(rbuf, detail))
	}
	if o.report == "" {
		return hs, func() error { return flushReport(rbuf) }, nil
	}
	rf, err := createOutput(o.report)
	if err != nil {
		return nil, nil, err
	}
	fbuf := bufio.NewWriter(rf.f)
	hs = append(hs, report.NewJSON(fbuf))
	return hs, func() error {
		if err := flushReport(fbuf); err != nil {
			rf.abort()
			return err
		}
		if err := rf.commit(); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return flushReport(rbuf)
	}, nil
}

func flushReport(b *bufio.Writer) error {
	if err := b.Flush(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

//go:build unix

package repair_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

// TestInputOverMaxSizeIsRefused maps a sparse file one byte over the limit (no memory
// is touched): the engine keeps offsets in 32 bits, so such an input must be refused
// before any is taken, not repaired with offsets that wrapped.
func TestInputOverMaxSizeIsRefused(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "huge.json"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	require.NoError(t, f.Truncate(repair.MaxSize+1))
	b, err := syscall.Mmap(int(f.Fd()), 0, repair.MaxSize+1, syscall.PROT_READ, syscall.MAP_SHARED)
	require.NoError(t, err)
	defer func() { require.NoError(t, syscall.Munmap(b)) }()

	res, err := repair.Repair(b, repair.Options{})
	require.ErrorContains(t, err, "over the engine's limit")
	require.Equal(t, repair.StatusUnparseable, res.Report.Status)
	_, err = repair.Validate(b, repair.Options{})
	require.ErrorContains(t, err, "over the engine's limit")
	_, err = repair.Inspect(b, repair.Options{})
	require.ErrorContains(t, err, "over the engine's limit")
	doc, err := repair.RepairDocument(b, repair.Options{})
	require.ErrorContains(t, err, "over the engine's limit")
	require.Equal(t, repair.StatusUnparseable, doc.Report.Status)
	_, err = repair.ParseDocument(b)
	require.ErrorContains(t, err, "over the engine's limit")
}

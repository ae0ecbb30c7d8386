package model_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/store/model"
)

func TestLatestWrite(t *testing.T) {
	t.Parallel()
	v := func(n int, kind string) model.VersionRow { return model.VersionRow{Version: n, Kind: kind} }
	for name, tt := range map[string]struct {
		versions []model.VersionRow
		from, to int
		ok       bool
	}{
		"Repair":           {[]model.VersionRow{v(1, "original"), v(2, "repaired")}, 1, 2, true},
		"RollbackOfRepair": {[]model.VersionRow{v(1, "original"), v(2, "repaired"), v(3, "restored")}, 2, 3, true},
		"Forced":           {[]model.VersionRow{v(1, "original"), v(2, "repaired"), v(3, "preserved"), v(4, "restored")}, 3, 4, true},
		"ChangedSince":     {[]model.VersionRow{v(1, "original"), v(2, "repaired"), v(3, "preserved")}, 1, 2, true},
		"NeverWritten":     {[]model.VersionRow{v(1, "original")}, 0, 0, false},
		"None":             {nil, 0, 0, false},
	} {
		from, to, ok := model.LatestWrite(tt.versions)
		require.Equal(t, []any{tt.from, tt.to, tt.ok}, []any{from, to, ok}, name)
	}
}

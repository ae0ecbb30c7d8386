package migrations

import (
	"fmt"
	"io/fs"
)

func FsGlob(v uint, dir string) ([]string, error) {
	return fs.Glob(FS, fmt.Sprintf("%06d_*.%s.sql", v, dir))
}

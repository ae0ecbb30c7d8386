//go:build !unix

package files

import "io"

// mapFile maps nothing where there is no mmap: every input is read as a stream.
func mapFile(io.Reader) *mapping { return nil }

type mapping struct{ data []byte }

func (*mapping) release(int) {}
func (*mapping) close()      {}

func isEFAULT(error) bool { return false }

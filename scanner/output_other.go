//go:build !unix

package scanner

import "io"

func writeBuffers(w io.Writer, bufs [][]byte) error { return writeEach(w, bufs) }

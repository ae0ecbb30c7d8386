//go:build !unix

package files

import "io"

func writeBuffers(w io.Writer, bufs [][]byte) error { return writeEach(w, bufs) }

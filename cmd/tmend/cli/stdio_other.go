//go:build !unix

package cli

import (
	"errors"
	"os"
)

func closedAtStart(int) bool { return false }

func openDescriptor(int) (*os.File, error) {
	return nil, errors.New("writing to a descriptor by name needs a Unix system")
}

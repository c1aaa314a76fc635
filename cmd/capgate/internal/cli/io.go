package cli

import (
	"fmt"
	"io"
)

// readAllLimited reads at most limit bytes and fails beyond.
func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("input larger than %d bytes", limit)
	}
	return b, nil
}

package objstore

import (
	"context"
	"strconv"
)

// Identity names the pinned version of name (fetch.Identifier): the
// store, the key, the size and the ETag (or content hash) listed when the
// source opened. A changed object gets another identity.
func (s *Source) Identity(_ context.Context, name string) (string, error) {
	p, err := s.pin(name)
	if err != nil {
		return "", err
	}
	return "objstore\x00" + s.store.ID() + "\x00" + name + "\x00" + strconv.FormatInt(p.Size, 10) + "\x00" + p.ETag, nil
}

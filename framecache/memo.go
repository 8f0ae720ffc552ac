package framecache

import (
	"os"
	"path/filepath"
)

// Memos are small values a caller derives at a cost and keys by what they
// depend on — the video package keeps the decoder build's name (FFmpeg's
// `-version`, a process start) under the stamps of its executable and
// libraries — so that later processes of the node read them instead. They
// live under Dir/v1/memo, one file per key (SHA-256 named), written
// atomically; they are not entries (no budget, not listed).

// memoDir is the memos' directory under Dir/v1 (not a group).
const memoDir = "memo"

// maxMemo bounds a memo's size.
const maxMemo = 64 << 10

// Memo returns the value kept under key, if any.
func (c *Cache) Memo(key string) ([]byte, bool) {
	if c.root == "" {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(c.root, memoDir, hashHex(key, 32)))
	if err != nil || len(b) == 0 || len(b) > maxMemo {
		return nil, false
	}
	return b, true
}

// SetMemo keeps value under key (best effort: a cache that cannot write
// keeps nothing).
func (c *Cache) SetMemo(key string, value []byte) {
	if c.root == "" || c.readonly.Load() || len(value) == 0 || len(value) > maxMemo {
		return
	}
	dir := filepath.Join(c.root, memoDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	_ = writeAtomic(dir, hashHex(key, 32), value)
}

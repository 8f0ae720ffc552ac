package testslowfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMount: files written through the mount are the backing directory's,
// byte for byte, and each write request takes the delay.
func TestMount(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	const delay = 20 * time.Millisecond
	Mount(t, mnt, backing, delay, "nothing else")
	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<14) // 768 KiB: 6 requests of 128 KiB
	start := time.Now()
	if err := os.WriteFile(filepath.Join(mnt, "f"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 6*delay {
		t.Fatalf("writing %d bytes took %v, want at least %v", len(data), took, 6*delay)
	}
	got, err := os.ReadFile(filepath.Join(backing, "f"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backing file: %d bytes, equal %v, %v", len(got), bytes.Equal(got, data), err)
	}
}

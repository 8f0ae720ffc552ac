package prerender

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrstream/lrstream/pipeline"
)

// TestSpecialFilesRefused: verify and replay read index.json and shards
// only from regular files of bounded size. A FIFO (which would block the
// open forever, deaf to SIGINT), a symlink to /dev/zero (endless data), a
// directory or an oversized index fail at once with an error naming the
// file, without reading it.
func TestSpecialFilesRefused(t *testing.T) {
	cfg := demoConfig(t)
	ref := t.TempDir()
	if _, err := Run(context.Background(), cfg, demoOptions(8), Options{Dir: ref, ShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	files := dirFiles(t, ref)
	x := mustIndex(t, ref)
	shard := x.Shards[1].File
	fifo := func(p string) error { return syscall.Mkfifo(p, 0o644) }
	zero := func(p string) error { return os.Symlink("/dev/zero", p) }
	tests := []struct {
		name, file string
		plant      func(p string) error
		want       string
	}{
		{"index FIFO", IndexFile, fifo, "not a regular file (a named pipe)"},
		{"index /dev/zero", IndexFile, zero, "not a regular file (a character device)"},
		{"index directory", IndexFile, func(p string) error { return os.Mkdir(p, 0o755) }, "not a regular file (a directory)"},
		{"index oversized", IndexFile, func(p string) error {
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(MaxIndexBytes + 1) // sparse: nothing written
		}, "more than the"},
		{"shard FIFO", shard, fifo, shard},
		{"shard /dev/zero", shard, zero, shard},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, b := range files {
				if n != tc.file {
					os.WriteFile(filepath.Join(dir, n), b, 0o644)
				}
			}
			if err := tc.plant(filepath.Join(dir, tc.file)); err != nil {
				t.Fatal(err)
			}
			run := func(what string, f func() error) {
				t.Helper()
				done := make(chan error, 1)
				go func() { done <- f() }()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Errorf("%s: %v, want an error containing %q", what, err, tc.want)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("%s hangs", what)
				}
			}
			run("verify", func() error {
				rep, err := Verify(context.Background(), dir)
				if err != nil && len(rep.Problems) > 0 {
					return &problemsError{err, rep.Problems}
				}
				return err
			})
			run("replay", func() error {
				return Replay(context.Background(), dir, pipeline.Share{}, &bytes.Buffer{})
			})
			run("replay (training)", func() error {
				return ReplayWith(context.Background(), dir, pipeline.Share{}, &bytes.Buffer{}, ReplayOptions{Train: &TrainOptions{Epochs: 2}})
			})
		})
	}
}

// problemsError carries verify's problems into the error text.
type problemsError struct {
	err   error
	probs []string
}

func (e *problemsError) Error() string { return e.err.Error() + "\n" + strings.Join(e.probs, "\n") }

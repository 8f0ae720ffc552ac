//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/sink"
)

// largeCameraDataset generates a small dataset whose camera columns are
// large enough to go through an arena (a 160x144 frame is 69,120 bytes,
// above sink.LargeArray and collate.BorrowMin).
func largeCameraDataset(t *testing.T) string {
	t.Helper()
	cameraDataset(t) // skips or fails without ffmpeg, as the other camera tests
	dir := filepath.Join(t.TempDir(), "cams")
	o := datagen.Options{Episodes: 4, MinFrames: 16, MaxFrames: 24, Density: datagen.DensitySparse, Dim: 2, Tasks: 2,
		Videos: true, VideoWidth: 160, VideoHeight: 144, Workers: 1}
	if _, err := datagen.Generate(context.Background(), dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shmOptions is how the test client offers its arena.
type shmOptions struct {
	size    int64
	seal    bool
	noFD    bool
	twoFDs  bool
	release bool // release each batch's regions once decoded (else hold them all)
	garbage bool // send a bad message instead of the first release
}

// shmResult is what a test client received.
type shmResult struct {
	header  *sink.Header
	batches []*sink.DecodedBatch
	placed  int    // columns that came through the arena
	err     string // in-band error
}

// shmClient connects to sock offering a memfd arena as the Python client
// does, reads the whole stream (arrays copied out of the arena by the
// decoder) and sends the release messages after every batch.
func shmClient(t *testing.T, sock string, o shmOptions) shmResult {
	t.Helper()
	fd, err := unix.MemfdCreate("lrstream-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, o.size); err != nil {
		t.Fatal(err)
	}
	if o.seal {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := unix.Mmap(fd, 0, int(o.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rights []byte
	switch {
	case o.twoFDs:
		rights = unix.UnixRights(fd, fd)
	case !o.noFD:
		rights = unix.UnixRights(fd)
	}
	if _, _, err := c.WriteMsgUnix(sink.AppendHello(nil, sink.Hello{NumWorkers: 1, WorldSize: 1, SHM: o.size}), rights, nil); err != nil {
		t.Fatal(err)
	}
	d := sink.NewDecoder(c)
	d.Arena = mem
	var res shmResult
	var released, end uint64
	for {
		m, err := d.Next()
		if err == io.EOF {
			return res
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Error != "":
			res.err = m.Error
			return res
		case m.Header != nil:
			res.header = m.Header
		case m.Batch != nil:
			res.batches = append(res.batches, m.Batch)
			for _, f := range m.Batch.Columns {
				if a, ok := f.Value.(*sink.Array); ok && a.SHMBytes > 0 {
					res.placed++
					end = max(end, a.SHMPos+a.SHMBytes)
				}
			}
			if res.header != nil && res.header.SHM {
				if o.garbage {
					c.Write([]byte{0xc1, 0xc1})
					continue
				}
				if o.release {
					released = end
				}
				// After the last batch the server may have closed the
				// connection already (EPIPE): what it sent is still read.
				if _, err := c.Write(sink.AppendRelease(nil, uint64(len(res.batches)), released)); err != nil && !errors.Is(err, unix.EPIPE) && !errors.Is(err, unix.ECONNRESET) {
					t.Fatal(err)
				}
			}
		}
	}
}

// plainBatches reads a whole stream without an arena.
func plainBatches(t *testing.T, sock string) []*sink.DecodedBatch {
	t.Helper()
	c := dialHello(t, sock, sink.Hello{NumWorkers: 1, WorldSize: 1})
	defer c.Close()
	st, err := sink.Decode(c)
	if err != nil {
		t.Fatal(err)
	}
	return st.Batches
}

// sameBatches reports how got differs from want (columns, bytes).
func sameBatches(got, want []*sink.DecodedBatch) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i].Columns) != len(want[i].Columns) {
			return errors.New("column counts differ")
		}
		for j, w := range want[i].Columns {
			g := got[i].Columns[j]
			wa, ok := w.Value.(*sink.Array)
			if !ok {
				continue
			}
			ga, ok := g.Value.(*sink.Array)
			if !ok || g.Name != w.Name || ga.DType != wa.DType || !bytes.Equal(ga.Data, wa.Data) {
				return fmt.Errorf("batch %d column %s differs", i, w.Name)
			}
		}
	}
	return nil
}

// TestServeSHM: a client offering a sealed memfd gets its camera columns
// through it (the header says shm) and the same batches as a plain
// client, while the ring wraps many times; a client that holds every
// region still gets the whole stream (inline once the arena is full); an
// arena above --client-shm is declined (plain stream); a bad offer gets a
// lone in-band error.
func TestServeSHM(t *testing.T) {
	ds := largeCameraDataset(t)
	recipe := filepath.Join("..", "..", "testdata", "demo-recipe.yaml")
	_, sock, _ := startServer(t, "--dataset", ds, "--recipe", recipe, "--batch-size", "8", "--cameras", "all", "--client-shm", "4MiB")
	want := plainBatches(t, sock)
	if len(want) < 6 {
		t.Fatalf("%d batches: the dataset is too small to wrap the arena", len(want))
	}
	t.Run("wraps", func(t *testing.T) {
		r := shmClient(t, sock, shmOptions{size: 2 << 20, seal: true, release: true})
		if r.err != "" || r.header == nil || !r.header.SHM {
			t.Fatalf("error %q, header %+v: want an shm stream", r.err, r.header)
		}
		if err := sameBatches(r.batches, want); err != nil {
			t.Fatal(err)
		}
		if r.placed != 2*len(want) {
			t.Fatalf("%d columns through the arena, want %d (every camera column)", r.placed, 2*len(want))
		}
	})
	t.Run("holds every region", func(t *testing.T) {
		r := shmClient(t, sock, shmOptions{size: 2 << 20, seal: true, release: false})
		if err := sameBatches(r.batches, want); err != nil {
			t.Fatal(err)
		}
		if r.placed == 0 || r.placed >= 2*len(want) {
			t.Fatalf("%d of %d columns through the arena, want some, then inline", r.placed, 2*len(want))
		}
	})
	t.Run("above --client-shm", func(t *testing.T) {
		r := shmClient(t, sock, shmOptions{size: 8 << 20, seal: true, release: true})
		if r.err != "" || r.header == nil || r.header.SHM || r.placed != 0 {
			t.Fatalf("error %q, header shm %v, %d placed: want a plain stream", r.err, r.header != nil && r.header.SHM, r.placed)
		}
		if err := sameBatches(r.batches, want); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a bad client message", func(t *testing.T) {
		r := shmClient(t, sock, shmOptions{size: 1 << 20, seal: true, garbage: true})
		if !strings.Contains(r.err, "shm client") {
			t.Fatalf("error %q after %d batches: want the stream to end with an in-band shm client error", r.err, len(r.batches))
		}
		// The server goes on serving others.
		if err := sameBatches(shmClient(t, sock, shmOptions{size: 2 << 20, seal: true, release: true}).batches, want); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no camera frames", func(t *testing.T) {
		_, sock, _ := startServer(t, "--dataset", ds, "--recipe", recipe, "--batch-size", "8", "--cameras", "none")
		r := shmClient(t, sock, shmOptions{size: 2 << 20, seal: true, release: true})
		if r.err != "" || r.header == nil || r.header.SHM || len(r.batches) == 0 {
			t.Fatalf("error %q, header %+v: want a plain stream", r.err, r.header)
		}
	})
	for _, tc := range []struct {
		name string
		o    shmOptions
		want string
	}{
		{"not sealed", shmOptions{size: 2 << 20}, "not sealed against shrinking"},
		{"no descriptor", shmOptions{size: 2 << 20, seal: true, noFD: true}, "with 0 file descriptors"},
		{"two descriptors", shmOptions{size: 2 << 20, seal: true, twoFDs: true}, "with 2 file descriptors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := shmClient(t, sock, tc.o)
			if !strings.HasPrefix(r.err, "bad hello") || !strings.Contains(r.err, tc.want) || r.header != nil {
				t.Fatalf("error %q, header %v: want a lone in-band error containing %q", r.err, r.header, tc.want)
			}
		})
	}
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/framecache"
)

// cacheEntries lists the entry files of a frame cache directory.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".fc") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFrameCacheExact: every byte a run streams is the same with the frame
// cache off, cold (decoding and storing) and warm (served from it), for
// the plain order, shuffled multi-epoch runs of every order, resized
// frames, --delta-timestamps camera windows and a rank's share; the warm
// run decodes nothing.
func TestFrameCacheExact(t *testing.T) {
	ds := cameraDataset(t)
	common := []string{"stream", "--dataset", ds, "--cameras", "all", "--batch-size", "5", "--workers", "2"}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"plan order", nil},
		{"global shuffle, 3 epochs", []string{"--shuffle", "--epochs", "3", "--seed", "7"}},
		{"partitioned, rank 1 of 2", []string{"--shuffle", "--epochs", "2", "--order", "partitioned", "--partitions", "2", "--rank", "1", "--world-size", "2"}},
		{"stratified, 2 epochs", []string{"--shuffle", "--epochs", "2", "--order", "stratified", "--partitions", "2"}},
		{"resized", []string{"--resize", "8x12", "--shuffle", "--epochs", "2"}},
		{"camera windows", []string{"--delta-timestamps", "observation.images.front=-0.1,0,0.1", "--shuffle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, common...), tc.flags...)
			want, errb, code := runCmd(t, append(args, "--frame-cache", "off")...)
			if code != 0 {
				t.Fatalf("--frame-cache off: %s", errb)
			}
			dir := t.TempDir()
			for _, pass := range []string{"cold", "warm"} {
				got, errb, code := runCmd(t, append(args, "--frame-cache-dir", dir)...)
				if code != 0 {
					t.Fatalf("%s: %s", pass, errb)
				}
				if got != want {
					t.Fatalf("%s cache: the stream (%d bytes) differs from the uncached one (%d bytes)", pass, len(got), len(want))
				}
				if pass == "warm" && !strings.Contains(errb, "decoded and stored") {
					t.Fatalf("warm run: no frame cache summary in %q", errb)
				}
				if pass == "warm" && !strings.Contains(errb, ", 0 decoded and stored") {
					t.Fatalf("warm run decoded frames: %s", errb)
				}
			}
			if len(cacheEntries(t, dir)) == 0 {
				t.Fatal("no cache entry was written")
			}
		})
	}
}

// TestFrameCacheDamagedAndChanged: damaged entries are dropped and the
// frames decoded again, identical; a video file changed in place is never
// served from the entries of its former version.
func TestFrameCacheDamagedAndChanged(t *testing.T) {
	ds := cameraDataset(t)
	args := []string{"stream", "--dataset", ds, "--cameras", "all", "--batch-size", "4", "--shuffle", "--epochs", "2"}
	dir := t.TempDir()
	cached := append(append([]string{}, args...), "--frame-cache-dir", dir)
	want, errb, code := runCmd(t, append(args, "--frame-cache", "off")...)
	if code != 0 {
		t.Fatal(errb)
	}
	if got, errb, code := runCmd(t, cached...); code != 0 || got != want {
		t.Fatalf("cold run differs (exit %d): %s", code, errb)
	}
	// Damage: a byte flipped in the middle of every entry.
	entries := cacheEntries(t, dir)
	for _, p := range entries {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, errb, code := runCmd(t, cached...)
	if code != 0 || got != want {
		t.Fatalf("run over damaged entries differs (exit %d): %s", code, errb)
	}
	if !strings.Contains(errb, "damaged") {
		t.Fatalf("no warning about the damaged entries: %s", errb)
	}
	// Change: the front camera's video replaced by another pattern (same
	// size, frame count and name); its cached frames must not be served.
	video := filepath.Join(ds, "videos", "observation.images.front", "chunk-000", "file-000.mp4")
	st, err := os.Stat(video)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries", "stream=nb_read_frames,width,height,r_frame_rate", "-of", "csv=p=0", video).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(strings.TrimSpace(string(probe)), ",")
	tmp := filepath.Join(t.TempDir(), "new.mp4")
	out, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size="+f[0]+"x"+f[1]+":rate="+f[2],
		"-frames:v", f[3], "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "4", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, out)
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(video, data, st.Mode()); err != nil {
		t.Fatal(err)
	}
	want2, errb, code := runCmd(t, append(args, "--frame-cache", "off")...)
	if code != 0 {
		t.Fatal(errb)
	}
	if want2 == want {
		t.Fatal("the replaced video gives the same stream: the test changes nothing")
	}
	if got, errb, code := runCmd(t, cached...); code != 0 || got != want2 {
		t.Fatalf("after the video changed, the cached run differs from decoding it (exit %d): %s", code, errb)
	}
}

// TestFrameCacheConcurrentProcesses: several stream processes sharing one
// cold cache directory all stream the uncached bytes, and a later run is
// served from what they stored.
func TestFrameCacheConcurrentProcesses(t *testing.T) {
	ds := cameraDataset(t)
	args := []string{"stream", "--dataset", ds, "--cameras", "all", "--batch-size", "4", "--shuffle", "--epochs", "2", "-q"}
	want, errb, code := runCmd(t, append(args, "--frame-cache", "off")...)
	if code != 0 {
		t.Fatal(errb)
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	outs := make([][]byte, 4)
	errs := make([]error, 4)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(testBinary, append(args, "--frame-cache-dir", dir)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			outs[i], errs[i] = cmd.Output()
			if errs[i] != nil {
				errs[i] = &exec.ExitError{Stderr: stderr.Bytes()}
			}
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("process %d: %s", i, errs[i].(*exec.ExitError).Stderr)
		}
		if string(outs[i]) != want {
			t.Fatalf("process %d streamed %d bytes that differ from the uncached %d", i, len(outs[i]), len(want))
		}
	}
	groups, err := framecache.List(dir)
	if err != nil || len(groups) != 1 || groups[0].Entries == 0 {
		t.Fatalf("cache after the runs: %+v, %v", groups, err)
	}
	got, errb, code := runCmd(t, append(args[:len(args)-1], "--frame-cache-dir", dir)...)
	if code != 0 || got != want || !strings.Contains(errb, ", 0 decoded and stored") {
		t.Fatalf("warm run (exit %d) differs or decoded: %s", code, errb)
	}
}

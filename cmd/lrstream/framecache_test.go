package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lrstream/lrstream/framecache"
	"github.com/lrstream/lrstream/sink"
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

// TestFrameCacheResumeAndPrerender: a run resumed from a batch's token
// over a warm cache continues with exactly the uncached batches, and
// prerender writes the same shards from the cache as decoding.
func TestFrameCacheResumeAndPrerender(t *testing.T) {
	ds := cameraDataset(t)
	dir := t.TempDir()
	args := []string{"stream", "--dataset", ds, "--cameras", "all", "--batch-size", "4", "--shuffle", "--seed", "5", "--epochs", "2"}
	full, errb, code := runCmd(t, append(args, "--frame-cache", "off")...)
	if code != 0 {
		t.Fatal(errb)
	}
	msgs := splitStream(t, full)
	batches := msgs[1 : len(msgs)-1]
	cut := len(batches) / 2
	tok := batches[cut].Batch.Meta.Resume
	for _, pass := range []string{"cold", "warm"} {
		rest, errb, code := runCmd(t, append(args, "--frame-cache-dir", dir, "--resume", tok)...)
		if code != 0 {
			t.Fatalf("%s resume: %s", pass, errb)
		}
		rmsgs := splitStream(t, rest)
		if len(rmsgs)-2 != len(batches)-cut-1 {
			t.Fatalf("%s resume: %d batches, want %d", pass, len(rmsgs)-2, len(batches)-cut-1)
		}
		for i, m := range rmsgs[1 : len(rmsgs)-1] {
			if !bytes.Equal(m.Raw, batches[cut+1+i].Raw) {
				t.Fatalf("%s resume: batch %d differs from the uncached run's", pass, i)
			}
		}
	}

	pr := func(name string, flags ...string) string {
		out := filepath.Join(t.TempDir(), name)
		a := append([]string{"prerender", "--out", out, "--dataset", ds, "--cameras", "all", "--batch-size", "4", "-q"}, flags...)
		if _, errb, code := runCmd(t, a...); code != 0 {
			t.Fatalf("prerender %s: %s", name, errb)
		}
		replay, errb, code := runCmd(t, "stream", "--from", out)
		if code != 0 {
			t.Fatalf("replay %s: %s", name, errb)
		}
		return replay
	}
	want := pr("off", "--frame-cache", "off")
	for _, pass := range []string{"cold", "warm"} {
		if got := pr(pass, "--frame-cache-dir", dir); got != want {
			t.Fatalf("prerender with a %s frame cache differs from decoding", pass)
		}
	}
}

// TestCacheCommand: `lrstream cache` lists what a run stored for its
// dataset, with the last run's hit rate, and clears it.
func TestCacheCommand(t *testing.T) {
	ds := cameraDataset(t)
	dir := t.TempDir()
	run := []string{"stream", "--dataset", ds, "--cameras", "all", "--frame-cache-dir", dir, "-q"}
	for range 2 {
		if _, errb, code := runCmd(t, run...); code != 0 {
			t.Fatal(errb)
		}
	}
	out, errb, code := runCmd(t, "cache", "--frame-cache-dir", dir, "--dataset", ds, "--json")
	if code != 0 {
		t.Fatal(errb)
	}
	var got struct {
		Datasets []struct {
			Dataset string
			Entries int
			Bytes   int64
			LastRun struct {
				HitRate float64 `json:"hit_rate"`
			} `json:"last_run"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	abs, _ := filepath.Abs(ds)
	if len(got.Datasets) != 1 || got.Datasets[0].Dataset != abs || got.Datasets[0].Entries == 0 || got.Datasets[0].LastRun.HitRate != 1 {
		t.Fatalf("cache listing: %s", out)
	}
	out, _, code = runCmd(t, "cache", "--frame-cache-dir", dir)
	if code != 0 || !strings.Contains(out, abs) || !strings.Contains(out, "100.0% of") {
		t.Fatalf("cache list (exit %d): %s", code, out)
	}
	out, errb, code = runCmd(t, "cache", "clear", "--frame-cache-dir", dir, "--dataset", ds)
	if code != 0 || !strings.Contains(out, "cleared "+abs) {
		t.Fatalf("cache clear (exit %d): %s%s", code, out, errb)
	}
	if n := len(cacheEntries(t, dir)); n != 0 {
		t.Fatalf("%d entries left after clear", n)
	}
	if _, errb, code := runCmd(t, "cache", "purge", "--frame-cache-dir", dir); code != 2 || !strings.Contains(errb, "want list or clear") {
		t.Fatalf("unknown action: exit %d: %s", code, errb)
	}
}

// TestFrameCacheServe: two DataLoader-worker clients of one server share
// its frame cache; their streams are the same with the cache off, cold and
// warm, and the warm server decodes nothing (its recorded run is all hits).
func TestFrameCacheServe(t *testing.T) {
	ds := cameraDataset(t)
	dir := t.TempDir()
	read := func(flags ...string) []string {
		args := append([]string{"--dataset", ds, "--cameras", "all", "--batch-size", "4", "--shuffle", "--epochs", "2", "--seed", "9"}, flags...)
		_, sock, stop := startServer(t, args...)
		outs := make([]string, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for w := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dialHello(t, sock, sink.Hello{Worker: w, NumWorkers: 2, WorldSize: 1})
				defer c.Close()
				b, err := io.ReadAll(c)
				outs[w], errs[w] = string(b), err
			}()
		}
		wg.Wait()
		if err := stop(); err != nil {
			t.Fatalf("serve %v: %v", flags, err)
		}
		for w, err := range errs {
			if err != nil {
				t.Fatalf("client %d: %v", w, err)
			}
			if _, err := sink.Decode(strings.NewReader(outs[w])); err != nil {
				t.Fatalf("client %d's stream: %v", w, err)
			}
		}
		return outs
	}
	want := read("--frame-cache", "off")
	for _, pass := range []string{"cold", "warm"} {
		got := read("--frame-cache-dir", dir)
		for w := range got {
			if got[w] != want[w] {
				t.Fatalf("%s cache: client %d's stream differs from the uncached one", pass, w)
			}
		}
	}
	groups, err := framecache.List(dir)
	if err != nil || len(groups) != 1 || groups[0].LastRun == nil {
		t.Fatalf("cache listing: %+v, %v", groups, err)
	}
	if r := groups[0].LastRun; r.FramesWritten != 0 || r.FramesRead == 0 {
		t.Fatalf("warm server: %d frames read, %d decoded and stored", r.FramesRead, r.FramesWritten)
	}
}

// TestFrameCacheBudgetAndUnwritable: a tiny budget keeps the cache within
// it while the run streams the same bytes; a cache directory that cannot
// be created leaves the run decoding, with exactly one warning.
func TestFrameCacheBudgetAndUnwritable(t *testing.T) {
	ds := cameraDataset(t)
	args := []string{"stream", "--dataset", ds, "--cameras", "all", "--batch-size", "4", "--shuffle", "--epochs", "2"}
	want, errb, code := runCmd(t, append(args, "--frame-cache", "off")...)
	if code != 0 {
		t.Fatal(errb)
	}
	dir := t.TempDir()
	const budget = 20_000 // bytes: a few entries of the 32×16 frames
	for range 2 {
		got, errb, code := runCmd(t, append(args, "--frame-cache-dir", dir, "--frame-cache-gb", "0.00002")...)
		if code != 0 || got != want {
			t.Fatalf("tiny budget: exit %d or the stream differs: %s", code, errb)
		}
		var total int64
		for _, p := range cacheEntries(t, dir) {
			if st, err := os.Stat(p); err == nil {
				total += st.Size()
			}
		}
		if total > budget {
			t.Fatalf("%d bytes of entries in a cache of budget %d", total, budget)
		}
		var stored int64
		if i := strings.Index(errb, "decoded and stored ("); i >= 0 {
			fmt.Sscanf(errb[i+len("decoded and stored ("):], "%d bytes", &stored)
		}
		if stored <= budget || len(cacheEntries(t, dir)) == 0 {
			t.Fatalf("the run stored %d bytes (want more than the budget: evictions) and kept %d entries: %s", stored, len(cacheEntries(t, dir)), errb)
		}
	}
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got, errb, code := runCmd(t, append(args, "--frame-cache-dir", filepath.Join(file, "frames"))...)
	if code != 0 || got != want {
		t.Fatalf("unwritable cache: exit %d or the stream differs: %s", code, errb)
	}
	if n := strings.Count(errb, "level=WARN"); n != 1 || !strings.Contains(errb, "frame cache") {
		t.Fatalf("unwritable cache: want one warning about the frame cache, got %d: %s", n, errb)
	}
}

// TestFrameCacheFlags: the flags' values are checked before a run, the
// environment gives their defaults.
func TestFrameCacheFlags(t *testing.T) {
	for _, tc := range []struct {
		mode, gb, codec, writes string // the flags
		env                     map[string]string
		on                      bool
		budget                  int64
		wantCodec               string
		direct                  bool
		wantErr                 string
	}{
		{on: true, wantCodec: "auto"},
		{mode: "off", on: false},
		{env: map[string]string{frameCacheEnv: "off"}, on: false},
		{mode: "on", env: map[string]string{frameCacheEnv: "off"}, on: true, wantCodec: "auto"},
		{gb: "2.5", on: true, budget: 2_500_000_000, wantCodec: "auto"},
		{env: map[string]string{frameCacheGBEnv: "1", frameCacheCodecEnv: "s2"}, on: true, budget: 1e9, wantCodec: "s2"},
		{gb: "10abc", wantErr: "--frame-cache-gb"},
		{gb: "-1", wantErr: "--frame-cache-gb"},
		{mode: "yes", wantErr: "want on or off"},
		{codec: "lz4", wantErr: "want auto, none, s2 or zstd"},
		{writes: "direct", on: true, wantCodec: "auto", direct: true},
		{env: map[string]string{frameCacheWriteEnv: "direct"}, on: true, wantCodec: "auto", direct: true},
		{writes: "buffered", env: map[string]string{frameCacheWriteEnv: "direct"}, on: true, wantCodec: "auto"},
		{writes: "odirect", wantErr: "want buffered or direct"},
	} {
		f := &frameCacheFlags{mode: tc.mode, gb: tc.gb, codec: tc.codec, writes: tc.writes}
		o, on, err := f.options(func(k string) string { return tc.env[k] }, nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q %q %q %v: error %v, want %q", tc.mode, tc.gb, tc.codec, tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || on != tc.on || (on && (o.Budget != tc.budget || o.Codec != tc.wantCodec || o.Direct != tc.direct)) {
			t.Errorf("%q %q %q %v: %+v, on %v, %v", tc.mode, tc.gb, tc.codec, tc.env, o, on, err)
		}
	}
}

// TestFrameCacheSummary: the run's summary line says what was served and stored, and
// why frames were not stored when the disk was slow or behind.
func TestFrameCacheSummary(t *testing.T) {
	for _, tc := range []struct {
		st       framecache.Stats
		want     []string
		wantNone []string
	}{
		{framecache.Stats{FramesRead: 30, FramesWritten: 10, BytesWritten: 2.5e9}, []string{"30 of 40 frames from the cache (75.0%), 10 decoded and stored (2.50 GB); /c"}, []string{"slow", "not stored"}},
		{framecache.Stats{FramesWritten: 10, SlowWrites: 1}, []string{"the disk was slow: entries written in the background"}, []string{"not stored"}},
		{framecache.Stats{FramesWritten: 10, SlowWrites: 1, Dropped: 3}, []string{"the disk was slow", "3 decoded segments not stored"}, nil},
	} {
		got := frameCacheSummary(tc.st, "/c")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: %q lacks %q", tc.st, got, w)
			}
		}
		for _, w := range tc.wantNone {
			if strings.Contains(got, w) {
				t.Errorf("%+v: %q says %q", tc.st, got, w)
			}
		}
	}
}

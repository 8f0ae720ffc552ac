package main

import (
	"github.com/lrstream/lrstream/internal/testkit"

	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/prerender"
	"github.com/lrstream/lrstream/sink"
)

// prShared returns a path under the read-only reference material.
func prShared(t *testing.T, parts ...string) string { return testkit.Shared(t, parts...) }

// prRun runs lrstream in-process with the given environment variables.
func prRun(t *testing.T, vars map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := run(context.Background(), e, args)
	return out.String(), errb.String(), code
}

func prReplay(t *testing.T, dir string, sh pipeline.Share) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := prerender.Replay(context.Background(), dir, sh, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// prFiles reads the files of dir (lock files excluded).
func prFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func prSameFiles(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d files, want %d", what, len(got), len(want))
	}
	for n, b := range want {
		if g, ok := got[n]; !ok {
			t.Errorf("%s: missing %s", what, n)
		} else if !bytes.Equal(g, b) {
			t.Errorf("%s: %s differs", what, n)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: extra file %s", what, n)
		}
	}
}

func prIndexes(t *testing.T, data []byte) []int64 {
	t.Helper()
	st, err := sink.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, b := range st.Batches {
		a := b.Column("index").(*sink.Array)
		for i := 0; i+8 <= len(a.Data); i += 8 {
			out = append(out, int64(binary.LittleEndian.Uint64(a.Data[i:])))
		}
	}
	return out
}

// TestPrerenderReplayEqualsStream: replaying a pre-render writes exactly
// the bytes `lrstream stream` writes with the same flags.
func TestPrerenderReplayEqualsStream(t *testing.T) {
	type tc struct {
		name string
		args []string
	}
	cases := []tc{
		// --cameras none: prerender's default (the demo has cameras; camera
		// replays: TestCamerasPrerenderReplay).
		{"demo", []string{"--cameras", "none"}},
		{"demo-keep-language", []string{"--cameras", "none", "--batch-size", "5", "--keep-language", "--mode", "fallback"}},
		{"demo-shuffled", []string{"--cameras", "none", "--shuffle", "--seed", "7", "--epochs", "2", "--batch-size", "16"}},
	}
	for _, ds := range []string{"pub_documented_top_wrist", "pub_inferred_front_wrist", "pub_jsonext_front_wrist", "pub_sorted_three_cams"} {
		cases = append(cases, tc{ds, []string{"--dataset", prShared(t, "conformance", "datasets", ds),
			"--recipe", prShared(t, "recipes", "subtask_mem.yaml"), "--mode", "fallback", "--on-error", "skip", "--batch-size", "64"}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, errb, code := prRun(t, nil, append([]string{"stream", "-q"}, c.args...)...)
			if code != 0 {
				t.Fatalf("stream: exit %d: %s", code, errb)
			}
			dir := filepath.Join(t.TempDir(), "out")
			_, errb, code = prRun(t, nil, append([]string{"prerender", "-q", "--out", dir, "--shard-size", "20KB"}, c.args...)...)
			if code != 0 {
				t.Fatalf("prerender: exit %d: %s", code, errb)
			}
			if got := prReplay(t, dir, pipeline.Share{}); !bytes.Equal(got, []byte(want)) {
				t.Fatalf("replay (%d bytes) differs from stream (%d bytes)", len(got), len(want))
			}
			out, errb, code := prRun(t, nil, "verify", dir)
			if code != 0 || !strings.HasPrefix(out, "OK ") {
				t.Fatalf("verify: exit %d: %s%s", code, out, errb)
			}
			x, err := prerender.ReadIndex(dir)
			if err != nil {
				t.Fatal(err)
			}
			if x.Totals.Shards < 2 && len(want) > 40_000 {
				t.Fatalf("%d bytes in %d shards", len(want), x.Totals.Shards)
			}
		})
	}
}

func TestPrerenderCommandRefusalsAndOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, errb, code := prRun(t, nil, "prerender", "-q", "--out", dir, "--shard-size", "20KB"); code != 0 {
		t.Fatal(errb)
	}
	out, _, code := prRun(t, nil, "prerender", "--out", dir, "--shard-size", "20KB")
	if code != 0 || !strings.Contains(out, "already complete") {
		t.Fatalf("rerun: exit %d: %s", code, out)
	}
	_, errb, code := prRun(t, nil, "prerender", "-q", "--out", dir, "--shard-size", "20KB", "--batch-size", "8", "--mode", "drop")
	if code != 1 || !strings.Contains(errb, "option batch_size: 32 in the directory, 8 now") ||
		!strings.Contains(errb, "mode: fallback in the directory, drop now") || !strings.Contains(errb, "--overwrite") {
		t.Fatalf("mismatch: exit %d: %s", code, errb)
	}
	if _, errb, code = prRun(t, nil, "prerender", "-q", "--out", dir, "--shard-size", "20KB", "--batch-size", "8", "--overwrite"); code != 0 {
		t.Fatalf("--overwrite: exit %d: %s", code, errb)
	}
	want, _, _ := prRun(t, nil, "stream", "-q", "--batch-size", "8", "--cameras", "none")
	if got := prReplay(t, dir, pipeline.Share{}); !bytes.Equal(got, []byte(want)) {
		t.Fatal("replay after --overwrite differs from stream")
	}
	for _, args := range [][]string{
		{"prerender", "--out", dir, "--shard-size", "12XB"},
		{"prerender", "--out", dir, "--rank", "3", "--world-size", "2"},
		{"prerender", "--out", dir, "--world-size", "2"},
		{"prerender", "--out", dir, "--epochs", "0"},
		{"prerender", "--out", dir, "--shuffle", "--rank", "0", "--world-size", "2"},
	} {
		if _, errb, code := prRun(t, nil, args...); code == 0 {
			t.Errorf("%v accepted: %s", args, errb)
		}
	}
	if _, _, code := prRun(t, nil, "prerender"); code != 2 {
		t.Errorf("prerender without --out: exit %d", code)
	}
}

func TestVerifyCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if _, errb, code := prRun(t, nil, "prerender", "-q", "--out", dir, "--shard-size", "20KB"); code != 0 {
		t.Fatal(errb)
	}
	out, errb, code := prRun(t, nil, "verify", dir)
	if code != 0 || !strings.Contains(out, "OK "+dir) || !strings.Contains(out, "1175 frames") {
		t.Fatalf("exit %d: %s%s", code, out, errb)
	}
	victim := filepath.Join(dir, "shard-000003.msgpack.zst")
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	os.WriteFile(victim, b, 0o644)
	out, errb, code = prRun(t, nil, "verify", dir, "-q")
	if code != 1 || out != "" || !strings.Contains(errb, "shard-000003.msgpack.zst") {
		t.Fatalf("corrupt shard: exit %d: %s%s", code, out, errb)
	}
	if _, _, code := prRun(t, nil, "verify"); code != 2 {
		t.Fatalf("verify without DIR: exit %d", code)
	}
	if _, errb, code := prRun(t, nil, "verify", t.TempDir()); code != 1 || !strings.Contains(errb, "index.json") {
		t.Fatalf("verify of an empty dir: exit %d: %s", code, errb)
	}
}

// lrstreamBinary returns the lrstream executable for subprocess tests
// (the test binary itself, see TestMain).
func lrstreamBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the binary (-short)")
	}
	return testBinary
}

// TestPrerenderKillResume SIGKILLs prerender processes at several points
// (after the first and third shard appear, at random moments, and a
// resumed run again) and checks that running the same command again ends
// with byte-identical shards and index.
func TestPrerenderKillResume(t *testing.T) {
	bin := lrstreamBinary(t)
	ds := filepath.Join(t.TempDir(), "ds")
	if _, errb, code := prRun(t, nil, "gen", "-q", "--out", ds, "--episodes", "8", "--min-frames", "200", "--max-frames", "400",
		"--dim", "14", "--density", "full", "--seed", "3"); code != 0 {
		t.Fatal(errb)
	}
	args := func(dir string) []string {
		return []string{"prerender", "-q", "--dataset", ds, "--recipe", prShared(t, "recipes", "subtask_mem_vqa_speech.yaml"),
			"--out", dir, "--shard-size", "8KB", "--batch-size", "24", "--workers", "1"}
	}
	ref := filepath.Join(t.TempDir(), "ref")
	start := time.Now()
	if out, err := exec.Command(bin, args(ref)...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	full := time.Since(start)
	want := prFiles(t, ref)
	if len(want) < 20 {
		// (kills wait for shard-000010)
		t.Fatalf("reference run wrote %d files; want many shards", len(want))
	}
	// killWhen starts a run into dir and SIGKILLs it when cond holds (or
	// lets it finish). It reports whether the kill happened before the
	// process exited.
	killWhen := func(dir string, cond func() bool) bool {
		cmd := exec.Command(bin, args(dir)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run exited before the kill: %v", err)
				}
				return false
			default:
			}
			if cond() {
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				return true
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	exists := func(dir, name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	}
	after := func(d time.Duration) func() bool {
		t0 := time.Now()
		return func() bool { return time.Since(t0) >= d }
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	type kill struct {
		name  string
		conds func(dir string) []func() bool // one per successive killed run
	}
	kills := []kill{
		{"first shard", func(dir string) []func() bool { return []func() bool{exists(dir, "shard-000000.msgpack.zst")} }},
		{"third shard", func(dir string) []func() bool { return []func() bool{exists(dir, "shard-000002.msgpack.zst")} }},
		{"first temp shard", func(dir string) []func() bool { return []func() bool{exists(dir, "shard-000000.msgpack.zst.tmp")} }},
		{"twice", func(dir string) []func() bool {
			return []func() bool{exists(dir, "shard-000004.msgpack.zst"), exists(dir, "shard-000010.msgpack.zst")}
		}},
	}
	for i := 0; i < 2; i++ {
		d := time.Duration(rng.Int64N(int64(full)))
		kills = append(kills, kill{fmt.Sprintf("random %s", d.Round(time.Millisecond)), func(string) []func() bool { return []func() bool{after(d)} }})
	}
	for _, k := range kills {
		t.Run(k.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			killed := 0
			for _, cond := range k.conds(dir) {
				if killWhen(dir, cond) {
					killed++
				}
			}
			out, err := exec.Command(bin, args(dir)...).CombinedOutput()
			if err != nil {
				t.Fatalf("resumed run: %v\n%s", err, out)
			}
			prSameFiles(t, k.name, prFiles(t, dir), want)
			if out, err := exec.Command(bin, "verify", dir).CombinedOutput(); err != nil {
				t.Fatalf("verify: %v\n%s", err, out)
			}
			t.Logf("killed %d time(s); resumed", killed)
		})
	}
}

// TestPrerenderRanksProcesses runs three rank processes on one machine,
// each given its rank a different way, finalizes, and replays.
func TestPrerenderRanksProcesses(t *testing.T) {
	bin := lrstreamBinary(t)
	ds := prShared(t, "conformance", "datasets", "pub_sorted_three_cams")
	rec := prShared(t, "recipes", "subtask.yaml")
	common := []string{"prerender", "-q", "--dataset", ds, "--recipe", rec, "--mode", "fallback", "--on-error", "skip",
		"--batch-size", "16", "--shard-size", "20KB"}
	dir := filepath.Join(t.TempDir(), "out")
	runs := []struct {
		args []string
		env  []string
	}{
		{[]string{"--rank", "0", "--world-size", "3"}, nil},
		{nil, []string{"RANK=1", "WORLD_SIZE=3"}},
		{[]string{"--world-size", "3"}, []string{"JOB_COMPLETION_INDEX=2"}},
	}
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, r := range runs {
		cmd := exec.Command(bin, append(append(append([]string{}, common...), "--out", dir), r.args...)...)
		cmd.Env = append(os.Environ(), r.env...)
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, &b)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("rank %d: %v\n%s", i, err, outs[i])
		}
	}
	if _, err := prerender.ReadIndex(dir); err == nil {
		t.Fatal("index.json before --finalize")
	}
	out, errb, code := prRun(t, nil, "prerender", "--finalize", dir)
	if code != 0 || !strings.Contains(out, "3 ranks") {
		t.Fatalf("finalize: exit %d: %s%s", code, out, errb)
	}
	if out, errb, code := prRun(t, nil, "verify", dir); code != 0 {
		t.Fatalf("verify: %s%s", out, errb)
	}
	live, errb, code := prRun(t, nil, "stream", "-q", "--dataset", ds, "--recipe", rec, "--mode", "fallback", "--on-error", "skip", "--batch-size", "16")
	if code != 0 {
		t.Fatal(errb)
	}
	want := prIndexes(t, []byte(live))
	if got := prIndexes(t, prReplay(t, dir, pipeline.Share{})); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replay of the 3 ranks holds %d samples, the live stream %d", len(got), len(want))
	}
	var all []int64
	for w := 0; w < 2; w++ {
		all = append(all, prIndexes(t, prReplay(t, dir, pipeline.Share{Worker: w, NumWorkers: 2}))...)
	}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Fatal("2 replay shares do not cover the 3 ranks exactly once")
	}
	// Missing rank: refused.
	os.Remove(filepath.Join(dir, "rank00001-index.json"))
	if _, errb, code := prRun(t, nil, "prerender", "--finalize", dir); code == 0 || !strings.Contains(errb, "rank(s) 1 of 3 missing") {
		t.Fatalf("finalize without rank 1: exit %d: %s", code, errb)
	}
}

func TestResolveRank(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		getenv      func(string) string
		rank, world int
		wantR       int
		wantW       int
		bad         bool
	}{
		{env(), -1, 0, 0, 1, false},
		{env(), 2, 4, 2, 4, false},
		{env(), 4, 4, 0, 0, true},
		{env(), 1, 0, 0, 0, true},
		{env(), -1, 3, 0, 0, true},
		{env("RANK", "1", "WORLD_SIZE", "2"), -1, 0, 1, 2, false},
		{env("RANK", "1", "WORLD_SIZE", "2"), -1, 3, 0, 0, true},
		{env("RANK", "1", "WORLD_SIZE", "2"), 0, 0, 0, 2, false},
		{env("JOB_COMPLETION_INDEX", "4"), -1, 6, 4, 6, false},
		{env("SLURM_PROCID", "3", "SLURM_NTASKS", "4"), -1, 0, 3, 4, false},
	} {
		re, err := resolveRank(tc.getenv, tc.rank, tc.world)
		if tc.bad {
			if err == nil {
				t.Errorf("rank %d world %d: accepted as %+v", tc.rank, tc.world, re)
			}
			continue
		}
		if err != nil || re.Rank != tc.wantR || re.WorldSize != tc.wantW {
			t.Errorf("rank %d world %d: %+v %v, want %d of %d", tc.rank, tc.world, re, err, tc.wantR, tc.wantW)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// otherToolFlags are flags the docs give to other programs (benchmark and
// interop scripts, pytest, pip, Slurm, torchrun), with where, so that
// TestDocFlagsExist knows them; an lrstream flag never belongs here.
var otherToolFlags = map[string]string{
	"annotate": "interop generator", "codec": "interop generator", "file": "bench/python_consumer.py",
	"limit": "bench/camera_lerobot.py", "pool-bytes": "bench/python_consumer.py", "replay": "bench/python_loader.py",
	"rounds": "bench/python_loader.py", "shm-bytes": "bench/python_consumer.py", "stream": "bench/python_loader.py",
	"gc-freeze": "bench/python_loader.py, bench/python_consumer.py", "import-torch": "bench/python_consumer.py",
	"lrstream": "bench scripts", "durations": "pytest", "no-deps": "pip", "no-index": "pip", "repo-id": "hf upload", "exclude": "hf buckets sync",
	"cpus-per-task": "Slurm", "job-name": "Slurm", "mem": "Slurm", "time": "Slurm", "array": "Slurm",
	"dependency": "Slurm", "requeue": "Slurm", "ntasks-per-node": "Slurm", "nproc-per-node": "torchrun",
	"bogus": "wire-format.md's example of an unknown flag", "resize-hxw": "a Markdown anchor (#--resize-hxw)",
	// python -m lrstream_client.train: lerobot-train's spellings (docs/lerobot-policies.md).
	"dataset.root": trainModule, "dataset.repo_id": trainModule,
	"dataset.revision": trainModule, "dataset.video_backend": trainModule, "batch_size": trainModule, "num_workers": trainModule,
	"log_freq": trainModule, "save_freq": trainModule, "output_dir": trainModule, "lrstream_args": trainModule,
	"steps": trainModule, "loader": trainModule, "device": trainModule,
	"root": "python/interop/fake_hub.py", "repo": "python/interop/fake_hub.py", "port": "python/interop/fake_hub.py",
	"cdn-port": "python/interop/fake_hub.py", "sha": "python/interop/fake_hub.py", "token": "python/interop/fake_hub.py",
	"page-size": "python/interop/fake_hub.py",
	"height":    "interop generator", "width": "interop generator",
}

const trainModule = "python -m lrstream_client.train"

// knownStale are stale flag mentions in pages of other areas, reported to
// their owners; the test fails once one is fixed, so that its entry goes.
var knownStale = map[string][]string{}

// commandFlags returns, per lrstream command, the flags its help lists
// (spelled without dashes), plus the accepted hidden ones.
func commandFlags(t *testing.T) map[string][]string {
	t.Helper()
	listed := regexp.MustCompile(`(?m)^  --?([a-z][a-z0-9-]*)`)
	out := map[string][]string{}
	for _, c := range commands() {
		args := []string{c.name, "--help"}
		if c.name == "recipe" {
			args = []string{"recipe", "--help"}
		}
		_, errb, code := runCmd(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d", args, code)
		}
		for _, m := range listed.FindAllStringSubmatch(errb, -1) {
			out[c.name] = append(out[c.name], m[1])
		}
		if slices.Contains(out[c.name], "download") {
			out[c.name] = append(out[c.name], "cache") // hidden: the old spelling
		}
		if len(out[c.name]) == 0 {
			t.Fatalf("%s: no flag in its help:\n%s", c.name, errb)
		}
	}
	return out
}

// docInvocation finds `lrstream CMD ARGS` in a line of a page (code
// block or inline code): the command and its arguments up to the end of
// the command (a pipe, ;, &&, a redirection, the end of a code span).
// An inline code span starting with a command and a flag (`stream
// --from DIR`) is one too.
var docInvocation = regexp.MustCompile("(?:(?:^|[\\s`(/])lrstream |`)(gen|inspect|recipe|stream|serve|prerender|verify|validate|bench) (--[^`|;&>)#]*|[^`|;&>)#-][^`|;&>)#]*)")

// docFlag finds a --flag token.
var docFlag = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_-])--([a-z][a-z0-9-]*(?:[_.][A-Za-z0-9_.]*[A-Za-z0-9])?)`)

// TestDocFlagsExist fails when README.md or docs/*.md mention a flag that
// no lrstream command has (issue 24 item 14: hub.md and validate.md used
// --cache after it became --download): in an `lrstream CMD …` invocation
// the flag must be CMD's; anywhere else some command's (or another
// program's, listed in otherToolFlags).
func TestDocFlagsExist(t *testing.T) {
	flags := commandFlags(t)
	any := map[string]bool{}
	for _, fs := range flags {
		for _, f := range fs {
			any[f] = true
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	stale := map[string]bool{}
	invocations := 0
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		// Shell continuation lines belong to their command.
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		for n, line := range strings.Split(text, "\n") {
			for _, m := range docInvocation.FindAllStringSubmatch(line, -1) {
				invocations++
				for _, f := range docFlag.FindAllStringSubmatch(m[2], -1) {
					if slices.Contains(flags[m[1]], f[1]) {
						continue
					}
					what := m[1] + " --" + f[1]
					if slices.Contains(knownStale[rel], what) {
						stale[rel+": "+what] = true
						continue
					}
					t.Errorf("%s:%d: `lrstream %s` has no flag --%s: %s", rel, n+1, m[1], f[1], strings.TrimSpace(line))
				}
			}
			for _, f := range docFlag.FindAllStringSubmatch(line, -1) {
				if strings.Contains(strings.Join(knownStale[rel], " "), " --"+f[1]) {
					continue // reported above
				}
				if strings.HasPrefix(f[1], "policy.") { // --policy.FIELD=VALUE of python -m lrstream_client.train
					continue
				}
				if !any[f[1]] && otherToolFlags[f[1]] == "" {
					t.Errorf("%s:%d: no lrstream command has --%s (another program's? list it in otherToolFlags): %s", rel, n+1, f[1], strings.TrimSpace(line))
				}
			}
		}
	}
	if invocations < 50 {
		t.Fatalf("only %d lrstream invocations found in the docs: is the pattern broken?", invocations)
	}
	var fixed []string
	for rel, whats := range knownStale {
		for _, w := range whats {
			if !stale[rel+": "+w] {
				fixed = append(fixed, rel+": "+w)
			}
		}
	}
	sort.Strings(fixed)
	for _, f := range fixed {
		t.Errorf("%s: no longer in the docs: remove it from knownStale", f)
	}
}

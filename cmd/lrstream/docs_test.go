package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lrstream/lrstream/render"
)

// docFiles are the pages whose ```sh blocks TestDocShellBlocks runs. The
// pages of other areas (hub.md, python.md, prerender.md, validate.md,
// video.md) are tested by their owners' suites.
var docFiles = []string{
	"README.md", "docs/architecture.md", "docs/datagen.md", "docs/performance.md",
	"docs/recipes.md", "docs/training.md", "docs/wire-format.md",
}

// shBlock is one ```sh block of a page.
type shBlock struct {
	file   string
	line   int
	text   string
	noTest string // the reason of a preceding <!-- no-test: reason --> comment
}

// shBlocks extracts the ```sh blocks of a Markdown page.
func shBlocks(file string, data []byte) []shBlock {
	var out []shBlock
	var cur *shBlock
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur = &shBlock{file: file, line: n}
			if r, ok := strings.CutPrefix(strings.TrimSpace(prev), "<!-- no-test:"); ok {
				cur.noTest = strings.TrimSpace(strings.TrimSuffix(r, "-->"))
			}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
		prev = line
	}
	return out
}

// TestDocShellBlocks runs every ```sh block of the README and of this
// area's docs as written (issue 16 items 14-15), in a scratch directory
// holding a copy of testdata/ and ./lrstream, with lrstream on PATH and a
// `go` shim that maps `go build -o X ./cmd/lrstream` and `go run
// ./cmd/lrstream` to the binary under test. Paths under /tmp/ are moved
// into the scratch directory. A block preceded by
// <!-- no-test: reason --> is not run (Hub, cluster, or minutes-long
// benchmarks); the reason must be given.
func TestDocShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documented commands (-short)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	lr := filepath.Join(bin, "lrstream")
	if err := os.Symlink(testBinary, lr); err != nil {
		t.Fatal(err)
	}
	shim := `#!/bin/sh
# go shim for the docs test: only the documented lrstream builds.
case "$1 $2 $3 $4" in
  "build -o "*" ./cmd/lrstream") cp "` + lr + `" "$3"; exit 0 ;;
esac
if [ "$1 $2" = "run ./cmd/lrstream" ]; then shift 2; exec "` + lr + `" "$@"; fi
echo "docs test go shim: unsupported: go $*" >&2
exit 97
`
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(root, "testdata"), filepath.Join(work, "testdata")).CombinedOutput(); err != nil {
		t.Fatalf("copy testdata: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Join(work, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, f := range docFiles {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range shBlocks(f, data) {
			name := strings.ReplaceAll(f, "/", "_") + ":" + strconv.Itoa(b.line)
			if b.noTest != "" {
				t.Logf("%s: not run: %s", name, b.noTest)
				continue
			}
			ran++
			t.Run(name, func(t *testing.T) {
				script := strings.ReplaceAll(b.text, "/tmp/", work+"/tmp/")
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
				cmd.Dir = work
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HF_HUB_OFFLINE=1")
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s line %d: %v\n--- script\n%s--- output\n%s", b.file, b.line, err, b.text, out)
				}
			})
		}
	}
	if ran == 0 {
		t.Fatal("no ```sh block ran")
	}
}

// TestShBlocks checks the block extractor.
func TestShBlocks(t *testing.T) {
	doc := "text\n```sh\necho a\n```\n<!-- no-test: needs the Hub -->\n```sh\necho b\n```\n```python\nx\n```\n"
	got := shBlocks("d.md", []byte(doc))
	if len(got) != 2 || got[0].text != "echo a\n" || got[0].line != 2 || got[0].noTest != "" ||
		got[1].text != "echo b\n" || got[1].noTest != "needs the Hub" {
		t.Fatalf("%+v", got)
	}
}

// TestDocModes checks that every `--mode X` the README and docs/ mention
// is a mode lrstream accepts (docs/python.md once named a mode
// "passthrough" that never existed).
func TestDocModes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	re := regexp.MustCompile("--mode[ =]([a-z|]+)")
	seen := 0
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(data, -1) {
			for _, mode := range strings.Split(string(m[1]), "|") {
				seen++
				if _, err := render.ParseMode(mode); err != nil {
					t.Errorf("%s: %q: %v", filepath.Base(p), m[0], err)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no --mode found in the docs")
	}
}

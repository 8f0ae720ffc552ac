package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/lrstream/lrstream/framecache"
)

func cacheCommand() command {
	return command{name: "cache", summary: "show what the frame cache holds (entries, bytes, last run's hit rate) or clear it", run: runCache}
}

// runCache is `lrstream cache [list|clear] [--dataset SPEC]`.
func runCache(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("lrstream cache", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var fc frameCacheFlags
	fs.StringVar(&fc.dir, "frame-cache-dir", "", "the frame cache's directory (default $"+frameCacheDirEnv+", else ~/.cache/lrstream/frames)")
	var dataset string
	fs.StringVar(&dataset, "dataset", "", "only this dataset: a local directory, ORG/NAME[@REVISION] or an object store URL (default: every dataset)")
	asJSON := fs.Bool("json", false, "print the listing as JSON")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream cache [list|clear] [--dataset SPEC] [flags]\n\nlist (the default) shows, per dataset, the frame cache's entries, their bytes on\ndisk and uncompressed, and the last run's hit rate; clear removes the entries of\n--dataset, or every entry. See docs/video.md, \"Frame cache\".\n\nflags:")
		printFlags(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	action := "list"
	if len(pos) > 0 {
		action = pos[0]
	}
	if len(pos) > 1 || (action != "list" && action != "clear") {
		return usageError(fs, fmt.Sprintf("unexpected argument %q: want list or clear", strings.Join(pos, " ")))
	}
	dir := fc.dir
	if dir == "" && e.getenv != nil {
		dir = e.getenv(frameCacheDirEnv)
	}
	if dir == "" {
		if dir, err = framecache.DefaultDir(); err != nil {
			return err
		}
	}
	groups, err := framecache.List(dir)
	if err != nil {
		return err
	}
	if dataset != "" {
		groups = matchGroups(groups, dataset)
	}
	if action == "clear" {
		return clearGroups(e.stdout, dir, dataset, groups)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"dir": dir, "datasets": groupsJSON(groups)})
	}
	printGroups(e.stdout, dir, groups)
	return nil
}

// datasetLabel is the label the frame cache files a dataset spec under
// (fetch.Label): a local directory's absolute path, else the spec
// without its @revision and trailing slashes.
func datasetLabel(spec string) string {
	if st, err := os.Stat(spec); err == nil && st.IsDir() {
		if abs, err := filepath.Abs(spec); err == nil {
			return abs
		}
	}
	if !strings.Contains(spec, "://") {
		spec, _, _ = strings.Cut(spec, "@")
	}
	return strings.TrimRight(spec, "/")
}

func matchGroups(groups []framecache.GroupInfo, spec string) []framecache.GroupInfo {
	want := datasetLabel(spec)
	var out []framecache.GroupInfo
	for _, g := range groups {
		if strings.TrimRight(g.Group, "/") == want {
			out = append(out, g)
		}
	}
	return out
}

func clearGroups(w io.Writer, dir, dataset string, groups []framecache.GroupInfo) error {
	if dataset == "" {
		n, b, err := framecache.Clear(dir, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "cleared %s: %d entries, %s\n", dir, n, formatGB(b))
		return nil
	}
	if len(groups) == 0 {
		fmt.Fprintf(w, "%s holds no frames of %s\n", dir, datasetLabel(dataset))
		return nil
	}
	for _, g := range groups {
		n, b, err := framecache.Clear(dir, g.Group)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "cleared %s from %s: %d entries, %s\n", g.Group, dir, n, formatGB(b))
	}
	return nil
}

// hitRate is the share of a run's frames served from the cache.
func hitRate(r *framecache.RunStats) float64 {
	if r == nil || r.FramesRead+r.FramesWritten == 0 {
		return 0
	}
	return float64(r.FramesRead) / float64(r.FramesRead+r.FramesWritten)
}

func groupsJSON(groups []framecache.GroupInfo) []map[string]any {
	out := []map[string]any{}
	for _, g := range groups {
		m := map[string]any{"dataset": g.Group, "entries": g.Entries, "bytes": g.Bytes, "raw_bytes": g.RawBytes}
		if r := g.LastRun; r != nil {
			m["last_run"] = map[string]any{"start": r.Start, "time": r.Time, "processes": r.Processes,
				"frames_read": r.FramesRead, "frames_written": r.FramesWritten,
				"hits": r.Hits, "misses": r.Misses, "hit_rate": hitRate(r)}
		}
		out = append(out, m)
	}
	return out
}

func printGroups(w io.Writer, dir string, groups []framecache.GroupInfo) {
	if len(groups) == 0 {
		fmt.Fprintf(w, "%s: no frames cached\n", dir)
		return
	}
	var entries int
	var bytes int64
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "dataset\tentries\ton disk\tdecoded\tlast run")
	for _, g := range groups {
		last := "-"
		if r := g.LastRun; r != nil {
			last = fmt.Sprintf("%s: %.1f%% of %d frames from the cache", r.Time.Local().Format("2006-01-02 15:04"), 100*hitRate(r), r.FramesRead+r.FramesWritten)
			if r.Processes > 1 {
				last += fmt.Sprintf(" (%d processes)", r.Processes)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", g.Group, g.Entries, formatGB(g.Bytes), formatGB(g.RawBytes), last)
		entries += g.Entries
		bytes += g.Bytes
	}
	tw.Flush()
	fmt.Fprintf(w, "%s: %d entries, %s\n", dir, entries, formatGB(bytes))
}

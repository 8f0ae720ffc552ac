package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/lrstream/lrstream/prerender"
	"github.com/lrstream/lrstream/sink"
)

func verifyCommand() command {
	return command{name: "verify", summary: "check a pre-rendered directory against its index", run: runVerify}
}

func runVerify(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("lrstream verify", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	quiet := fs.Bool("q", false, "print nothing on success")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: lrstream verify [-q] DIR\n\nChecks every shard of a pre-rendered directory (lrstream prerender) against\nits index: size, SHA-256, decompression, every message decoded, batch and\nsample counts, seq continuity, episode ranges. Exits 1 naming each problem.\n\nflags:")
		printFlags(fs)
	}
	// Flags may also follow DIR.
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		return usageError(fs, "DIR is required")
	case len(rest) > 1:
		return usageError(fs, fmt.Sprintf("unexpected argument %q", rest[1]))
	}
	dir := rest[0]
	path := dir
	if isStoreURL(dir) { // mirrored into the node's object cache (docs/storage.md)
		local, cleanup, err := mirrorStore(ctx, e, dir)
		if err != nil {
			return err
		}
		defer cleanup()
		path = local
	}
	rep, err := prerender.Verify(ctx, path)
	err = inSpec(err, path, dir)
	for i, p := range rep.Problems {
		rep.Problems[i] = strings.ReplaceAll(p, path, dir)
	}
	for _, n := range rep.Notes {
		if !*quiet {
			fmt.Fprintf(e.stderr, "note: %s: %s\n", dir, n)
		}
	}
	if len(rep.Problems) > 0 {
		for _, p := range rep.Problems {
			fmt.Fprintf(e.stderr, "FAIL %s: %s\n", dir, p)
		}
		fmt.Fprintf(e.stderr, "lrstream verify: %s: %d problem(s)\n", dir, len(rep.Problems))
		return exitError{1}
	}
	if err != nil {
		return err
	}
	if !*quiet {
		x := rep.Index
		rev := x.Revision
		if rev == "" {
			rev = "local"
		}
		recipe := fmt.Sprintf("recipe %s (sha256 %.12s), %s", x.Recipe, x.RecipeSHA256, x.Mode)
		if x.Mode == sink.ModeNoRecipe {
			recipe = "no recipe (no messages)"
		}
		fmt.Fprintf(e.stdout, "OK %s: %d shards, %d batches, %d samples from %d frames; %.1f MB (%.1f MB of messages); %s@%s, %s, world size %d\n",
			dir, rep.Shards, rep.Batches, rep.Samples, x.Totals.Frames, float64(rep.Bytes)/1e6, float64(rep.RawBytes)/1e6,
			x.Dataset, rev, recipe, x.WorldSize)
	}
	return nil
}

package pipeline

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lrstream/lrstream/bench/datagen"
	"github.com/lrstream/lrstream/render"
)

// TestKeepMemoAcrossEpochs: the partitioned order's keep index, assembled
// from the keep bits of episodes seen in earlier epochs, equals the one
// built by reading, epoch after epoch, and only episodes not seen before
// have their language read.
func TestKeepMemoAcrossEpochs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	if _, err := datagen.Generate(context.Background(), dir, datagen.Options{Episodes: 40, MinFrames: 20, MaxFrames: 50,
		FramesPerFile: 300, Cameras: []string{}, Dim: 2, Tasks: 3, Seed: 5, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	gen := datasetConfig(t, dir, demoConfig(t, render.ModeFallback).Recipe)
	for _, tc := range []struct {
		name string
		cfg  *Config
		P, C int
	}{
		{"demo fallback", demoConfig(t, render.ModeFallback), 6, 3},
		{"demo drop", demoConfig(t, render.ModeDrop), 4, 2},
		{"generated, several episodes a file", gen, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := map[int64]int64{}
			for _, e := range tc.cfg.Dataset.Episodes {
				frames[e.Index] = e.Length
			}
			for slot := 0; slot < tc.C; slot++ {
				m := newKeepMemo()
				// The memo of the keep pass (in fallback mode with
				// --on-error fail the index comes from metadata).
				m.pass = true
				seen := map[int64]bool{}
				var read, dropped int64
				for epoch := int64(0); epoch < 4; epoch++ {
					parts, _ := partitionEpisodes(tc.cfg, 7, epoch, tc.P, 8)
					var mine []int64
					for p := slot; p < tc.P; p += tc.C {
						mine = append(mine, parts[p]...)
					}
					c := *tc.cfg
					c.Selection = episodeSelection(mine)
					got, err := m.index(context.Background(), &c, mine)
					if err != nil {
						t.Fatal(err)
					}
					want, err := buildKeepIndex(context.Background(), []Mix{{Config: &c, Weight: 1}})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got.keep, want.keep) || !slices.Equal(got.runs[0], want.runs[0]) ||
						!slices.Equal(got.unitStart, want.unitStart) || !slices.Equal(got.src, want.src) {
						t.Fatalf("slot %d epoch %d: the assembled keep index differs from the one read", slot, epoch)
					}
					if len(got.units) != len(want.units) {
						t.Fatalf("slot %d epoch %d: %d unit groups, want %d", slot, epoch, len(got.units), len(want.units))
					}
					for i := range got.units {
						for j := range got.units[i] {
							a, b := got.units[i][j], want.units[i][j]
							if a.File != b.File || a.RowGroup != b.RowGroup || !slices.Equal(a.Episodes, b.Episodes) {
								t.Fatalf("slot %d epoch %d: unit group %d differs", slot, epoch, i)
							}
						}
					}
					if got.stats.Dropped != want.stats.Dropped || got.stats.Errors != want.stats.Errors {
						t.Fatalf("slot %d epoch %d: dropped/errors %d/%d, want %d/%d", slot, epoch,
							got.stats.Dropped, got.stats.Errors, want.stats.Dropped, want.stats.Errors)
					}
					dropped += got.stats.Dropped
					for _, e := range mine {
						if !seen[e] {
							seen[e] = true
							read += frames[e]
						}
					}
					if m.learned != read {
						t.Fatalf("slot %d epoch %d: read the language of %d frames, want %d (the episodes not seen before)", slot, epoch, m.learned, read)
					}
					if len(m.noMemo) != 0 {
						t.Fatalf("slot %d: episodes %v not memoized", slot, m.noMemo)
					}
				}
				if tc.cfg.Mode == render.ModeDrop && dropped == 0 {
					t.Logf("slot %d: no dropped frame", slot)
				}
			}
		})
	}
}

package shard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// OpenOptions control OpenDatasetWith.
type OpenOptions struct {
	// Tolerate, when set, receives the metadata inconsistencies a user
	// chose to be warned about (--on-inconsistent warn) instead of failing
	// on them; it is kept as the dataset's schema.Dataset.Tolerate, so that
	// Plan reports the data-file inconsistencies it finds through it too.
	Tolerate func(error)
	// SkipInfoCheck opens a dataset whose info.json fails schema.Info.Check
	// (except a *schema.VersionError): for lint tools that report those
	// problems themselves (lrstream validate); such a dataset must not be
	// streamed.
	SkipInfoCheck bool
}

// OpenDatasetWith is OpenDataset with options.
func OpenDatasetWith(ctx context.Context, src fetch.Source, opts OpenOptions) (*schema.Dataset, error) {
	return openDataset(ctx, src, opts)
}

// trimmedErr is an error with a shorter message than its cause's.
type trimmedErr struct {
	msg string
	err error
}

func (e *trimmedErr) Error() string { return e.msg }
func (e *trimmedErr) Unwrap() error { return e.err }

// trimInfo drops schema.ParseInfo's "info.json: " prefix from err: the
// *Error wrapping it names meta/info.json already.
func trimInfo(err error) error {
	if msg, ok := strings.CutPrefix(err.Error(), "info.json: "); ok {
		return &trimmedErr{msg: msg, err: err}
	}
	return err
}

// versionError completes a *schema.VersionError for a v2.x label on a v3
// layout (meta/episodes/ present), which is refused as well: the label is
// what LeRobot checks, and a wrong one hides which format the files are.
func versionError(ctx context.Context, src fetch.Source, err error) error {
	var ve *schema.VersionError
	if !errors.As(err, &ve) || !strings.HasPrefix(ve.Version, "v2") {
		return err
	}
	names, lerr := src.List(ctx, EpisodesDir)
	if lerr != nil || len(names) == 0 {
		return err
	}
	return fmt.Errorf("%w; the files have the v3 layout (%s/), so if LeRobot v3 wrote them, codebase_version is wrong: set it to %q", err, EpisodesDir, schema.SupportedVersion)
}

// checkIndex checks the episodes index against itself and info.json:
// each episode's length matches its [dataset_from_index,
// dataset_to_index) range, no two ranges overlap, no episode is empty, and
// the totals (total_episodes, total_frames, total_tasks) agree. Each
// problem goes through ds.Inconsistent.
func checkIndex(ds *schema.Dataset, src fetch.Source) error {
	var frames int64
	for i := range ds.Episodes {
		e := &ds.Episodes[i]
		n := e.ToIndex - e.FromIndex
		if e.Length != n {
			if err := ds.Inconsistent(episodeErr(src, e, fmt.Errorf("length %d, but dataset_from_index %d to dataset_to_index %d spans %d frames", e.Length, e.FromIndex, e.ToIndex, n))); err != nil {
				return err
			}
		}
		if n == 0 {
			if err := ds.Inconsistent(episodeErr(src, e, errors.New("empty episode (no frames)"))); err != nil {
				return err
			}
		}
		frames += n
	}
	byFrom := make([]*schema.Episode, len(ds.Episodes))
	for i := range ds.Episodes {
		byFrom[i] = &ds.Episodes[i]
	}
	sort.SliceStable(byFrom, func(i, j int) bool { return byFrom[i].FromIndex < byFrom[j].FromIndex })
	for i := 1; i < len(byFrom); i++ {
		a, b := byFrom[i-1], byFrom[i]
		if b.FromIndex < a.ToIndex {
			if err := ds.Inconsistent(episodeErr(src, b, fmt.Errorf("frames [%d, %d) overlap episode %d's [%d, %d)", b.FromIndex, b.ToIndex, a.Index, a.FromIndex, a.ToIndex))); err != nil {
				return err
			}
		}
	}
	in := &ds.Info
	for _, c := range []struct {
		what      string
		info, got int64
	}{
		{"total_episodes", in.TotalEpisodes, int64(len(ds.Episodes))},
		{"total_frames", in.TotalFrames, frames},
		{"total_tasks", in.TotalTasks, int64(len(ds.Tasks))},
	} {
		if c.info == c.got {
			continue
		}
		where := "the episodes index (meta/episodes) lists"
		unit := map[string]string{"total_episodes": "episodes", "total_frames": "frames", "total_tasks": "tasks"}[c.what]
		if c.what == "total_tasks" {
			where = TasksPath + " lists"
		}
		if err := ds.Inconsistent(fileErr(src.ID(), InfoPath, fmt.Errorf("%s is %d but %s %d %s", c.what, c.info, where, c.got, unit))); err != nil {
			return err
		}
	}
	return nil
}

func episodeErr(src fetch.Source, e *schema.Episode, err error) *Error {
	file := e.IndexFile
	if file == "" {
		file = EpisodesDir
	}
	return &Error{Dataset: src.ID(), File: file, RowGroup: -1, Episode: e.Index, Index: -1, Err: err}
}

// checkFileSchema checks a data file's columns against info.json: the core
// frame columns and every declared numeric and language feature must be
// present (a language column missing from one file is an error like a
// missing numeric feature, not frames silently turned task-only).
func checkFileSchema(src fetch.Source, ds *schema.Dataset, path string, ft *footer) error {
	present := ft.topLevel()
	for _, c := range coreColumns {
		if !present[c] {
			return &Error{Dataset: src.ID(), File: path, RowGroup: -1, Episode: -1, Index: -1, Column: c, Err: errors.New("missing column (a core frame column)")}
		}
	}
	for _, f := range ds.Info.Features {
		if present[f.Name] {
			if err := schema.CheckStored(f, storedColumn(ft, f.Name)); err != nil {
				return &Error{Dataset: src.ID(), File: path, RowGroup: -1, Episode: -1, Index: -1, Column: f.Name, Err: err}
			}
			continue
		}
		if !(f.IsNumeric() || f.IsLanguage()) {
			continue
		}
		kind := "feature"
		if f.IsLanguage() {
			kind = "language column"
		}
		return &Error{Dataset: src.ID(), File: path, RowGroup: -1, Episode: -1, Index: -1, Column: f.Name,
			Err: fmt.Errorf("%s declared in %s is missing from the data file", kind, InfoPath)}
	}
	return nil
}

// checkFileEpisodes checks a data file's footer against the episodes the
// index assigns to it, cheaply (row counts and the episode_index
// statistics, no data read): the file holds as many rows as its indexed
// episodes have frames; a row group's smallest and largest episode_index
// (values that occur in it) are episodes indexed in this file; every
// indexed episode falls in some row group's range. A violation means
// frames the metadata promises would be lost (or frames streamed that it
// does not list): each goes through ds.Inconsistent, naming episode and
// file.
func checkFileEpisodes(src fetch.Source, ds *schema.Dataset, f *planFile) error {
	ft := f.footer
	inFile := make(map[int64]*schema.Episode, len(f.episodes))
	var want int64
	for _, ep := range f.episodes {
		inFile[ep.Index] = ep
		want += ep.ToIndex - ep.FromIndex
	}
	epCol := ft.leafIndex(ColEpisodeIndex)
	var rows int64
	allStats := true
	type span struct{ lo, hi int64 }
	var spans []span
	for rg := 0; rg < ft.numRowGroups(); rg++ {
		n := ft.rowGroup(rg).NumRows
		rows += n
		if n == 0 {
			continue
		}
		lo, hi, ok := ft.int64Stats(rg, epCol)
		if !ok {
			allStats = false
			continue
		}
		spans = append(spans, span{lo, hi})
		for _, e := range []int64{lo, hi} {
			if inFile[e] != nil {
				continue
			}
			msg := fmt.Sprintf("holds frames of episode %d, which %s does not assign to this file", e, EpisodesDir)
			if other, ok := ds.Episode(e); ok {
				p, _ := ds.Info.DataFile(other.DataChunk, other.DataFile)
				msg += fmt.Sprintf(" (it assigns it to %s)", p)
			}
			if err := ds.Inconsistent(&Error{Dataset: src.ID(), File: f.path, RowGroup: rg, Episode: e, Index: -1, Column: ColEpisodeIndex, Err: errors.New(msg)}); err != nil {
				return err
			}
			if f.foreign == nil {
				f.foreign = map[int]bool{}
			}
			f.foreign[rg] = true
			if lo == hi {
				break
			}
		}
	}
	if allStats {
		for _, ep := range f.episodes {
			covered := false
			for _, s := range spans {
				if s.lo <= ep.Index && ep.Index <= s.hi {
					covered = true
					break
				}
			}
			if !covered && ep.ToIndex > ep.FromIndex {
				err := &Error{Dataset: src.ID(), File: f.path, RowGroup: -1, Episode: ep.Index, Index: -1,
					Err: fmt.Errorf("%s assigns the episode's %d frames to this file, but no row group holds episode_index %d", ep.IndexFile, ep.ToIndex-ep.FromIndex, ep.Index)}
				if err := ds.Inconsistent(err); err != nil {
					return err
				}
			}
		}
	}
	if rows != want {
		ids := make([]string, 0, len(f.episodes))
		for _, ep := range f.episodes {
			ids = append(ids, fmt.Sprint(ep.Index))
		}
		err := fileErr(src.ID(), f.path, fmt.Errorf("holds %d frames but %s assigns it %d (episodes %s)", rows, EpisodesDir, want, strings.Join(ids, ",")))
		if err := ds.Inconsistent(err); err != nil {
			return err
		}
	}
	return nil
}

// fileEpisodesErr adds to a data file's open error which episodes the
// index assigns to the file (a changed data/file_index names a file that
// does not exist).
func fileEpisodesErr(f *planFile) error {
	var se *Error
	if !errors.As(f.err, &se) || se.File != f.path {
		return f.err
	}
	ids := make([]string, 0, len(f.episodes))
	for _, ep := range f.episodes {
		ids = append(ids, fmt.Sprint(ep.Index))
	}
	if len(f.episodes) == 1 {
		se.Episode = f.episodes[0].Index
	}
	se.Err = fmt.Errorf("%w (%s assigns episodes %s to this file)", se.Err, EpisodesDir, strings.Join(ids, ","))
	return se
}

// frameChecker returns the check of a decoded batch against the metadata,
// applied by ReadUnit to what it decoded: every frame's episode_index is an
// episode the index assigns to the unit's file, its index lies in the
// episode's [dataset_from_index, dataset_to_index) and frame_index is its
// offset there, its timestamp is finite and non-negative, and its
// task_index is in meta/tasks.parquet. Errors name file, row group,
// episode and frame; they are never tolerated (a frame that disagrees with
// the metadata cannot be streamed correctly).
func frameChecker(src fetch.Source, ds *schema.Dataset, u *Unit) func(*Batch, error) (*Batch, error) {
	return func(b *Batch, err error) (*Batch, error) {
		if err != nil || b == nil {
			return b, err
		}
		if err := checkFrames(src, ds, u, b); err != nil {
			return nil, err
		}
		return b, nil
	}
}

func checkFrames(src fetch.Source, ds *schema.Dataset, u *Unit, b *Batch) error {
	var ep *schema.Episode
	fail := func(i int, col string, format string, args ...any) error {
		return &Error{Dataset: src.ID(), File: u.File, RowGroup: u.RowGroup, Episode: b.EpisodeIndex[i], Index: b.Index[i], Column: col,
			Err: fmt.Errorf("frame_index %d: %s", b.FrameIndex[i], fmt.Sprintf(format, args...))}
	}
	for i := 0; i < b.Len(); i++ {
		e := b.EpisodeIndex[i]
		if ep == nil || ep.Index != e {
			var ok bool
			if ep, ok = ds.Episode(e); !ok {
				return fail(i, ColEpisodeIndex, "episode_index %d is not in the episodes index (%s)", e, EpisodesDir)
			}
			if !u.Partial && !containsSorted(u.Episodes, e) {
				p, _ := ds.Info.DataFile(ep.DataChunk, ep.DataFile)
				return fail(i, ColEpisodeIndex, "a frame of episode %d, which %s assigns to %s", e, EpisodesDir, p)
			}
		}
		if x := b.Index[i]; x < ep.FromIndex || x >= ep.ToIndex {
			return fail(i, ColIndex, "index %d is outside episode %d's range [%d, %d) in %s", x, e, ep.FromIndex, ep.ToIndex, ep.IndexFile)
		}
		if fi := b.FrameIndex[i]; fi != b.Index[i]-ep.FromIndex {
			return fail(i, ColFrameIndex, "index %d is frame %d of the episode (dataset_from_index %d)", b.Index[i], b.Index[i]-ep.FromIndex, ep.FromIndex)
		}
		if ts := float64(b.Timestamp[i]); math.IsNaN(ts) || math.IsInf(ts, 0) || ts < 0 {
			return fail(i, ColTimestamp, "timestamp %v: want a finite, non-negative time", ts)
		}
		if t := b.TaskIndex[i]; t < 0 || t >= int64(len(ds.Tasks)) || ds.Tasks[t].Index != t {
			if _, ok := ds.TaskText(t); !ok {
				return fail(i, ColTaskIndex, "task_index %d is not in %s", t, TasksPath)
			}
		}
	}
	return nil
}

// MissingEpisodes returns the episodes that sel.Episodes names but the
// dataset does not have (for example 50 in --episodes 3,50 of a
// 12-episode dataset), as ranges.
func MissingEpisodes(ds *schema.Dataset, sel Selection) Ranges {
	var out Ranges
	eps := ds.Episodes // sorted by Index
	for _, r := range sel.Episodes {
		next := r.Lo // first episode of r not yet accounted for
		k := sort.Search(len(eps), func(i int) bool { return eps[i].Index >= r.Lo })
		for ; k < len(eps) && eps[k].Index <= r.Hi; k++ {
			if eps[k].Index > next {
				out = append(out, Range{next, eps[k].Index - 1})
			}
			next = eps[k].Index + 1
			if eps[k].Index == math.MaxInt64 {
				next = r.Hi + 1 // loop ends; nothing is missing past it
			}
		}
		if next <= r.Hi && next >= r.Lo {
			out = append(out, Range{next, r.Hi})
		}
	}
	return out
}

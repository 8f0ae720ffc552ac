package shard

import (
	"fmt"
	"math"
	"sort"

	"github.com/lrstream/lrstream/schema"
)

// CheckVideoSpans checks the episodes index's video locations of the
// cameras keys (nil: every camera of spans) against the episodes and
// against each other, the checks a frame's position in its video file
// rests on (a frame is looked up at from_timestamp + its timestamp, so a
// range moved by one frame gives every frame of the episode its
// neighbour's pixels):
//
//   - 0 <= from_timestamp < to_timestamp, both finite;
//   - to_timestamp - from_timestamp is the episode's length / fps, or up
//     to a frame less (plus tol, LeRobot's tolerance_s), never half a
//     frame more: LeRobot's writers put the episode's duration there,
//     and converted datasets (open_50) its last frame's timestamp, one
//     frame less; a range longer than its episode belongs to another
//     (two episodes of lengths n and n+1 swapped: the longer one's range
//     is too short by a frame, the shorter one's too long);
//   - the ranges [from_timestamp, to_timestamp) of the episodes in one
//     video file do not overlap (by more than tol).
//
// It returns every problem found, each a *Error naming the episodes index
// file, the episode and the column, and saying which camera and video
// file. fps is info.json's.
func CheckVideoSpans(ds *schema.Dataset, spans []VideoSpan, keys []string, tol float64) []error {
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	length := make(map[int64]int64, len(ds.Episodes))
	for _, e := range ds.Episodes {
		length[e.Index] = e.ToIndex - e.FromIndex
	}
	fps := ds.Info.FPS
	var errs []error
	type fileKey struct {
		key         string
		chunk, file int64
	}
	files := map[fileKey][]VideoSpan{}
	var order []fileKey
	for _, sp := range spans {
		if keys != nil && !want[sp.Key] {
			continue
		}
		fk := fileKey{sp.Key, sp.Chunk, sp.File}
		if files[fk] == nil {
			order = append(order, fk)
		}
		if err := checkSpan(sp, length, fps, tol); err != nil {
			errs = append(errs, spanError(ds, sp, "from_timestamp", err))
			continue
		}
		files[fk] = append(files[fk], sp)
	}
	for _, fk := range order {
		in := files[fk]
		sort.SliceStable(in, func(i, j int) bool { return in[i].From < in[j].From })
		for i := 1; i < len(in); i++ {
			prev, cur := in[i-1], in[i]
			if cur.From < prev.To-tol {
				errs = append(errs, spanError(ds, cur, "from_timestamp", fmt.Errorf(
					"its range [%g, %g) overlaps episode %d's [%g, %g) in the same video file: one of them would get the other's frames",
					cur.From, cur.To, prev.Episode, prev.From, prev.To)))
			}
		}
	}
	return errs
}

// checkSpan checks one episode's range against its length.
func checkSpan(sp VideoSpan, length map[int64]int64, fps, tol float64) error {
	if math.IsNaN(sp.From) || math.IsInf(sp.From, 0) || math.IsNaN(sp.To) || math.IsInf(sp.To, 0) || sp.From < 0 || sp.To <= sp.From {
		return fmt.Errorf("from_timestamp %g, to_timestamp %g: want 0 <= from < to", sp.From, sp.To)
	}
	n, ok := length[sp.Episode]
	if !ok || !(fps > 0) {
		return nil // not in the index: the index checks say so
	}
	d := sp.To - sp.From
	want := float64(n) / fps
	if d > want+0.5/fps || d < want-1/fps-tol {
		return fmt.Errorf("range [%g, %g) is %.6g s = %.4g frames at %g fps, but the episode has %d frames: the index does not locate this episode in its video",
			sp.From, sp.To, d, d*fps, fps, n)
	}
	return nil
}

// spanError locates a problem of span sp: the index file, episode and
// column, with the camera and video file in the message.
func spanError(ds *schema.Dataset, sp VideoSpan, col string, err error) error {
	name, ferr := ds.Info.VideoFile(sp.Key, sp.Chunk, sp.File)
	if ferr != nil {
		name = fmt.Sprintf("chunk %d file %d", sp.Chunk, sp.File)
	}
	return &Error{Dataset: ds.ID, File: sp.IndexFile, RowGroup: -1, Episode: sp.Episode, Index: -1,
		Column: "videos/" + sp.Key + "/" + col, Err: fmt.Errorf("camera %s, video file %s: %w", sp.Key, name, err)}
}

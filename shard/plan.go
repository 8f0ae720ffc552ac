package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// Unit is one row group of one data file, the unit of reading. Plan
// returns units in global index order.
type Unit struct {
	// Seq is the unit's position in the plan.
	Seq int
	// File is the dataset-relative path of the data file.
	File string
	// RowGroup is the row group's ordinal in the file.
	RowGroup int
	// Rows is the row group's row count (before episode filtering).
	Rows int64
	// Episodes lists, ascending, the selected episodes whose frames the row
	// group may hold (from the episodes index and the row group's
	// episode_index statistics).
	Episodes []int64
	// Partial is set when the row group may also hold frames of episodes
	// that are not selected: ReadUnit then keeps only frames of Episodes.
	Partial bool

	// pq holds the file's parsed footer, shared by the file's units so
	// that ReadUnit does not read it again, and the plan's read buffers;
	// or, planned through a Footers, the file's size and the footer's
	// bytes around its row groups, and meta the unit's row group's
	// metadata (see unitTail).
	pq   *pqFile
	meta []byte
}

// planFile is a data file with selected episodes.
type planFile struct {
	path     string
	episodes []*schema.Episode // every indexed episode of the file
	first    int64             // smallest dataset_from_index
	footer   *footer
	release  func() // the footer's, when read through a Footers
	err      error
	// foreign marks the row groups holding frames of episodes the index
	// does not assign to the file (tolerated inconsistencies): their units
	// are read Partial, keeping only the indexed episodes' frames.
	foreign map[int]bool
}

// footerParallelism bounds concurrent footer reads in Plan.
const footerParallelism = 8

// Plan lists the units holding frames of the selected episodes, in global
// index order. Files and row groups without a selected episode are not
// opened or read; Plan only reads the footers of the files it keeps. A
// selection matching no episode gives an empty plan (see CheckSelection).
func Plan(ctx context.Context, src fetch.Source, ds *schema.Dataset, sel Selection) ([]Unit, error) {
	return PlanWith(ctx, src, ds, sel, PlanOptions{})
}

// PlanOptions are Plan's options.
type PlanOptions struct {
	// Footers, when set, is where footers are read through (shared with
	// the process's other plans and reads) and where the units find them:
	// the units do not hold their footers (see Footers). Without it each
	// unit holds its file's footer.
	Footers *Footers
}

// PlanWith is Plan with options.
func PlanWith(ctx context.Context, src fetch.Source, ds *schema.Dataset, sel Selection, o PlanOptions) ([]Unit, error) {
	files, err := selectedFiles(src, ds, sel)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	readFooters(ctx, src, files, o.Footers)
	defer func() {
		for _, f := range files {
			if f.release != nil {
				f.release()
			}
		}
	}()

	var units []Unit
	bufs := newReadBuffers() // the plan's units' read buffers
	for _, f := range files {
		if f.err != nil {
			return nil, fileEpisodesErr(f)
		}
		if err := checkFileSchema(src, ds, f.path, f.footer); err != nil {
			return nil, err
		}
		if err := checkFileEpisodes(src, ds, f); err != nil {
			return nil, err
		}
		us, err := planRowGroups(src, f, sel, bufs, o.Footers)
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			u.Seq = len(units)
			units = append(units, u)
		}
	}
	return units, nil
}

// selectedFiles groups the episodes by data file and returns the files
// with at least one selected episode, in order of their first frame
// index; none when no episode is selected.
func selectedFiles(src fetch.Source, ds *schema.Dataset, sel Selection) ([]*planFile, error) {
	byPath := map[string]*planFile{}
	var files []*planFile
	nsel := 0
	for i := range ds.Episodes {
		ep := &ds.Episodes[i]
		p, err := ds.Info.DataFile(ep.DataChunk, ep.DataFile)
		if err != nil {
			return nil, fileErr(src.ID(), InfoPath, fmt.Errorf("data_path: %w", err))
		}
		pf := byPath[p]
		if pf == nil {
			pf = &planFile{path: p, first: ep.FromIndex}
			byPath[p] = pf
			files = append(files, pf)
		}
		pf.episodes = append(pf.episodes, ep)
		if ep.FromIndex < pf.first {
			pf.first = ep.FromIndex
		}
		if sel.Contains(ep.Index) {
			nsel++
		}
	}
	if nsel == 0 {
		return nil, nil
	}
	// Keep files with at least one selected episode.
	kept := files[:0]
	for _, f := range files {
		for _, ep := range f.episodes {
			if sel.Contains(ep.Index) {
				kept = append(kept, f)
				break
			}
		}
	}
	files = kept
	sort.SliceStable(files, func(i, j int) bool { return files[i].first < files[j].first })
	return files, nil
}

// readFooters reads the footers of files concurrently (through footers
// when not nil), setting each file's footer, release and err.
func readFooters(ctx context.Context, src fetch.Source, files []*planFile, footers *Footers) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, footerParallelism)
	for _, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func(f *planFile) {
			defer wg.Done()
			defer func() { <-sem }()
			if footers != nil {
				f.footer, f.release, f.err = footers.open(ctx, src, f.path)
				return
			}
			p, err := openFile(ctx, src, f.path, nil)
			if err != nil {
				f.err = err
				return
			}
			p.Close()
			f.footer = p.footer
		}(f)
	}
	wg.Wait()
}

func planRowGroups(src fetch.Source, f *planFile, sel Selection, bufs *readBuffers, store *Footers) ([]Unit, error) {
	ft := f.footer
	epCol := ft.leafIndex(ColEpisodeIndex)
	if epCol < 0 {
		return nil, fileErr(src.ID(), f.path, errors.New("no episode_index column"))
	}
	pq := &pqFile{footer: ft, bufs: bufs}
	if store != nil && len(ft.shape.rgSpans) != ft.numRowGroups() {
		return nil, fileErr(src.ID(), f.path, fmt.Errorf("corrupt footer: %d row groups parsed, %d walked", ft.numRowGroups(), len(ft.shape.rgSpans)))
	}
	if store != nil {
		// Each unit keeps its row group's part of the footer; the rest
		// is the file's units' (copied: the footer itself is let go).
		l := ft.shape.rgList
		pq = &pqFile{size: ft.size, bufs: bufs, head: slices.Clone(ft.raw[:l[0]]), foot: slices.Clone(ft.raw[l[1]:]), store: store}
	}
	var units []Unit
	for rg := 0; rg < ft.numRowGroups(); rg++ {
		rows := ft.rowGroup(rg).NumRows
		if rows == 0 {
			continue
		}
		lo, hi, ok := ft.int64Stats(rg, epCol)
		u := Unit{File: f.path, RowGroup: rg, Rows: rows, pq: pq}
		present := 0
		for _, ep := range f.episodes {
			if ok && (ep.Index < lo || ep.Index > hi) {
				continue
			}
			present++
			if sel.Contains(ep.Index) {
				u.Episodes = append(u.Episodes, ep.Index)
			}
		}
		if len(u.Episodes) == 0 {
			continue
		}
		u.Partial = !sel.All() && (!ok || len(u.Episodes) < present || hi-lo+1 > int64(present)) || f.foreign[rg]
		if store != nil {
			u.meta = ft.unitRowGroup(rg)
		}
		units = append(units, u)
	}
	return units, nil
}

// CheckSelection returns an error when sel matches none of the dataset's
// episodes (for example --episodes beyond the last episode).
func CheckSelection(ds *schema.Dataset, sel Selection) error {
	for i := range ds.Episodes {
		if sel.Contains(ds.Episodes[i].Index) {
			return nil
		}
	}
	return fmt.Errorf("episode selection (--episodes %q, --exclude-episodes %q) matches none of the dataset's %d episodes", sel.Episodes.String(), sel.Exclude.String(), len(ds.Episodes))
}

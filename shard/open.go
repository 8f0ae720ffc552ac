package shard

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/schema"
)

// Metadata file locations inside a dataset.
const (
	InfoPath     = "meta/info.json"
	TasksPath    = "meta/tasks.parquet"
	EpisodesDir  = "meta/episodes"
	tasksColumn  = "task"
	pandasIndex  = "__index_level_0__"
	taskIndexCol = "task_index"
)

// OpenDataset reads a dataset's metadata: meta/info.json, meta/tasks.parquet
// and every meta/episodes/chunk-*/file-*.parquet. It checks info.json's
// meaning (schema.Info.Check; a dataset that is not LeRobot v3 gets a
// *schema.VersionError saying how to convert it) and the episodes index
// against itself and info.json's totals: any inconsistency is an error
// (OpenDatasetWith can tolerate them).
func OpenDataset(ctx context.Context, src fetch.Source) (ds *schema.Dataset, err error) {
	return openDataset(ctx, src, OpenOptions{})
}

// parseInfoVersion parses info.json checking only its codebase_version.
func parseInfoVersion(data []byte) (schema.Info, error) {
	in, err := schema.ParseInfoUnchecked(data)
	if err == nil {
		err = schema.CheckVersion(in.CodebaseVersion)
	}
	return in, err
}

func openDataset(ctx context.Context, src fetch.Source, opts OpenOptions) (ds *schema.Dataset, err error) {
	data, err := fetch.ReadAll(ctx, src, InfoPath)
	if err != nil {
		return nil, fileErr(src.ID(), InfoPath, err)
	}
	parse := schema.ParseInfo
	if opts.SkipInfoCheck {
		parse = parseInfoVersion
	}
	info, err := parse(data)
	if err != nil {
		return nil, fileErr(src.ID(), InfoPath, versionError(ctx, src, trimInfo(err)))
	}
	ds = &schema.Dataset{ID: src.ID(), Revision: src.Revision(), Info: info, Tolerate: opts.Tolerate}
	if ds.Tasks, err = readTasks(ctx, src); err != nil {
		return nil, err
	}
	if ds.Episodes, err = readEpisodes(ctx, src); err != nil {
		return nil, err
	}
	if err := checkIndex(ds, src); err != nil {
		return nil, err
	}
	return ds, nil
}

func readTasks(ctx context.Context, src fetch.Source) ([]schema.Task, error) {
	p, err := openTable(ctx, src, TasksPath, []string{taskIndexCol, tasksColumn, pandasIndex})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fail := func(err error) error { return fileErr(src.ID(), TasksPath, err) }
	if !p.has(taskIndexCol) {
		return nil, fail(errors.New("no task_index column"))
	}
	txtCol := tasksColumn
	if !p.has(txtCol) {
		txtCol = pandasIndex
	}
	if !p.has(txtCol) {
		return nil, fail(errors.New("no task column (neither \"task\" nor the pandas index \"__index_level_0__\")"))
	}
	ints, err := p.readInts(taskIndexCol, p.allRowGroups())
	if err != nil {
		return nil, fail(fmt.Errorf("task_index: %w", err))
	}
	strs, err := p.readStrings(txtCol)
	if err != nil {
		return nil, fail(fmt.Errorf("task column %s: %w", txtCol, err))
	}
	tasks := make([]schema.Task, len(ints))
	for i, v := range ints {
		tasks[i] = schema.Task{Index: v, Text: strs[i]}
	}
	sort.SliceStable(tasks, func(i, j int) bool { return tasks[i].Index < tasks[j].Index })
	for i := 1; i < len(tasks); i++ {
		if tasks[i].Index == tasks[i-1].Index {
			return nil, fail(fmt.Errorf("task_index %d listed twice", tasks[i].Index))
		}
	}
	return tasks, nil
}

var episodeColumns = []string{
	"episode_index", "length", "dataset_from_index", "dataset_to_index",
	"data/chunk_index", "data/file_index", "tasks",
}

func readEpisodes(ctx context.Context, src fetch.Source) ([]schema.Episode, error) {
	names, err := src.List(ctx, EpisodesDir)
	if err != nil {
		return nil, fileErr(src.ID(), EpisodesDir, err)
	}
	var eps []schema.Episode
	n := 0
	for _, name := range names {
		if !strings.HasSuffix(name, ".parquet") {
			continue
		}
		n++
		part, err := readEpisodeFile(ctx, src, name)
		if err != nil {
			return nil, err
		}
		eps = append(eps, part...)
	}
	if n == 0 {
		return nil, fileErr(src.ID(), EpisodesDir, errors.New("no episodes index (meta/episodes/chunk-*/file-*.parquet)"))
	}
	sort.SliceStable(eps, func(i, j int) bool { return eps[i].Index < eps[j].Index })
	for i := 1; i < len(eps); i++ {
		if eps[i].Index == eps[i-1].Index {
			return nil, fileErr(src.ID(), EpisodesDir, fmt.Errorf("episode %d listed twice", eps[i].Index))
		}
	}
	return eps, nil
}

func readEpisodeFile(ctx context.Context, src fetch.Source, name string) ([]schema.Episode, error) {
	p, err := openTable(ctx, src, name, episodeColumns)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rgs := p.allRowGroups()
	get := func(col string, required bool) ([]int64, error) {
		if !p.has(col) {
			if required {
				return nil, fileErr(src.ID(), name, fmt.Errorf("missing column %s", col))
			}
			return nil, nil
		}
		v, err := p.readInts(col, rgs)
		if err != nil {
			return nil, fileErr(src.ID(), name, fmt.Errorf("column %s: %w", col, err))
		}
		return v, nil
	}
	epi, err := get("episode_index", true)
	if err != nil {
		return nil, err
	}
	from, err := get("dataset_from_index", true)
	if err != nil {
		return nil, err
	}
	to, err := get("dataset_to_index", true)
	if err != nil {
		return nil, err
	}
	chunk, err := get("data/chunk_index", true)
	if err != nil {
		return nil, err
	}
	fileIdx, err := get("data/file_index", true)
	if err != nil {
		return nil, err
	}
	length, err := get("length", false)
	if err != nil {
		return nil, err
	}
	eps := make([]schema.Episode, len(epi))
	for i := range eps {
		e := &eps[i]
		e.Index, e.FromIndex, e.ToIndex = epi[i], from[i], to[i]
		e.DataChunk, e.DataFile, e.IndexFile = chunk[i], fileIdx[i], name
		if length != nil {
			e.Length = length[i]
		} else {
			e.Length = to[i] - from[i]
		}
		if e.ToIndex < e.FromIndex {
			return nil, fileErr(src.ID(), name, fmt.Errorf("episode %d: dataset_to_index %d < dataset_from_index %d", e.Index, e.ToIndex, e.FromIndex))
		}
	}
	if p.has("tasks") {
		tasks, err := p.readStringLists("tasks")
		if err != nil {
			return nil, fileErr(src.ID(), name, fmt.Errorf("column tasks: %w", err))
		}
		for i := range eps {
			eps[i].Tasks = tasks[i]
		}
	}
	return eps, nil
}

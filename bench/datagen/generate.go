package datagen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ErrNotEmpty is returned by Generate when the output directory exists and
// is not empty and Options.Force is not set.
var ErrNotEmpty = errors.New("output directory is not empty")

// Result describes a generated dataset.
type Result struct {
	// Episodes, Frames, Tasks and DataFiles are the dataset's totals.
	Episodes  int
	Frames    int64
	Tasks     int
	DataFiles int
	// Bytes is the total size of the data files.
	Bytes int64
	// Elapsed is the wall time Generate took.
	Elapsed time.Duration
}

// FramesPerSecond is the generation speed.
func (r Result) FramesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Frames) / r.Elapsed.Seconds()
}

// dataFile is the span of episodes [first, end) stored in one data file.
type dataFile struct {
	first, end   int
	chunk, index int
	from         int64 // global index of its first frame
	rows         int64
}

// plan is everything decided before any frame is written: episode lengths,
// tasks and the file layout.
type plan struct {
	o      Options
	tasks  []taskSpec // by task_index (order of first use)
	epTask []int32
	epLen  []int32
	epFrom []int64
	files  []dataFile
	frames int64
}

func makePlan(o Options) *plan {
	p := &plan{o: o, epTask: make([]int32, o.Episodes), epLen: make([]int32, o.Episodes), epFrom: make([]int64, o.Episodes)}
	tr := newRand(o.Seed, streamTasks, 0)
	var pool []taskSpec
	seen := map[string]bool{}
	for try := 0; len(pool) < o.Tasks && try < 100*o.Tasks; try++ {
		t := makeTask(tr)
		if !seen[t.text] {
			seen[t.text] = true
			pool = append(pool, t)
		}
	}
	remap := make([]int32, len(pool))
	for i := range remap {
		remap[i] = -1
	}
	var cur dataFile
	fileNo := 0
	closeFile := func(end int) {
		cur.end = end
		cur.chunk, cur.index = fileNo/o.FilesPerChunk, fileNo%o.FilesPerChunk
		p.files = append(p.files, cur)
		fileNo++
		cur = dataFile{first: end, from: p.frames}
	}
	for ep := range o.Episodes {
		r := newRand(o.Seed, streamLength, uint64(ep))
		n := o.MinFrames + r.IntN(o.MaxFrames-o.MinFrames+1)
		ti := r.IntN(len(pool))
		if remap[ti] < 0 {
			remap[ti] = int32(len(p.tasks))
			p.tasks = append(p.tasks, pool[ti])
		}
		if cur.rows > 0 && cur.rows+int64(n) > int64(o.FramesPerFile) {
			closeFile(ep)
		}
		p.epTask[ep], p.epLen[ep], p.epFrom[ep] = remap[ti], int32(n), p.frames
		p.frames += int64(n)
		cur.rows += int64(n)
	}
	if cur.rows > 0 {
		closeFile(o.Episodes)
	}
	return p
}

func (p *plan) annotate(ep int) episodeLang {
	return annotate(p.o.Seed, ep, int(p.epLen[ep]), &p.o, &p.tasks[p.epTask[ep]])
}

func (p *plan) dataPath(f dataFile) string {
	return filepath.Join("data", fmt.Sprintf("chunk-%03d", f.chunk), fmt.Sprintf("file-%03d.parquet", f.index))
}

// Generate writes a complete LeRobot v3 dataset into dir according to
// opts. The dataset is written to a temporary sibling directory and renamed
// to dir only once complete, so an interrupted run never leaves a dataset
// that looks complete. dir must not exist or be empty unless opts.Force is
// set, in which case its previous content is replaced.
func Generate(ctx context.Context, dir string, opts Options) (Result, error) {
	start := time.Now()
	o, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	dir = filepath.Clean(dir)
	exists, empty, err := dirState(dir)
	if err != nil {
		return Result{}, err
	}
	if exists && !empty && !o.Force {
		return Result{}, fmt.Errorf("datagen: %s: %w (use Force to replace it)", dir, ErrNotEmpty)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Result{}, fmt.Errorf("datagen: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".partial-")
	if err != nil {
		return Result{}, fmt.Errorf("datagen: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Result{}, fmt.Errorf("datagen: %w", err)
	}

	p := makePlan(o)
	res, err := p.write(ctx, tmp)
	if err != nil {
		return Result{}, err
	}
	if exists {
		if empty {
			if err := os.Remove(dir); err != nil {
				return Result{}, fmt.Errorf("datagen: %w", err)
			}
		} else {
			old := tmp + ".old"
			if err := os.Rename(dir, old); err != nil {
				return Result{}, fmt.Errorf("datagen: replacing %s: %w", dir, err)
			}
			defer os.RemoveAll(old)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Result{}, fmt.Errorf("datagen: %w", err)
	}
	done = true
	res.Elapsed = time.Since(start)
	return res, nil
}

func dirState(dir string) (exists, empty bool, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, true, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("datagen: %w", err)
	}
	if !fi.IsDir() {
		return true, false, fmt.Errorf("datagen: %s is not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true, false, fmt.Errorf("datagen: %w", err)
	}
	return true, len(ents) == 0, nil
}

// write writes the whole dataset into root.
func (p *plan) write(ctx context.Context, root string) (Result, error) {
	res := Result{Episodes: p.o.Episodes, Frames: p.frames, Tasks: len(p.tasks), DataFiles: len(p.files)}
	stats := make([]*featureStats, len(p.files))
	sizes := make([]int64, len(p.files))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		prog     = Progress{TotalEpisodes: p.o.Episodes, TotalFrames: p.frames}
	)
	report := func(frames int) {
		if p.o.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		prog.Episodes++
		prog.Frames += int64(frames)
		p.o.Progress(prog)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(p.o.Workers, max(1, len(p.files))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				st, n, err := p.writeFile(ctx, root, k, report)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					continue
				}
				stats[k], sizes[k] = st, n
			}
		}()
	}
feed:
	for k := range p.files {
		select {
		case work <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return Result{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("datagen: %w", err)
	}
	if p.o.Videos {
		if err := p.writeVideos(ctx, root); err != nil {
			return Result{}, err
		}
	}
	total := newFeatureStats(p.o.Dim)
	for k := range p.files {
		total.merge(stats[k])
		res.Bytes += sizes[k]
	}
	if err := p.writeMeta(root, total); err != nil {
		return Result{}, err
	}
	return res, nil
}

// writerProps are pyarrow ParquetWriter's defaults (snappy, dictionary
// pages, statistics), except that the float vectors are written PLAIN:
// random floats never profit from a dictionary, and hashing them dominated
// generation time.
func writerProps() *parquet.WriterProperties {
	return parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(true),
		parquet.WithDictionaryFor("action.list.element", false),
		parquet.WithDictionaryFor("observation.state.list.element", false),
		parquet.WithStats(true),
		parquet.WithCreatedBy("lrstream datagen (arrow-go v18)"),
	)
}

// writeFile writes data file k, one row group per episode, and returns its
// feature statistics and size.
func (p *plan) writeFile(ctx context.Context, root string, k int, report func(int)) (*featureStats, int64, error) {
	o := &p.o
	f := p.files[k]
	rel := p.dataPath(f)
	var shape fileShape
	if (o.Variant == VariantInferred || o.Variant == VariantInferredSorted) && o.Density != DensityNone {
		for ep := f.first; ep < f.end; ep++ {
			el := p.annotate(ep)
			shape.addEpisode(&el)
		}
	}
	sc := dataSchema(o, shape)
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, 0, fmt.Errorf("datagen: %w", err)
	}
	fh, err := os.Create(path)
	if err != nil {
		return nil, 0, fmt.Errorf("datagen: %w", err)
	}
	defer fh.Close()
	bw := bufio.NewWriterSize(fh, 1<<20)
	fw, err := pqarrow.NewFileWriter(sc, bw, writerProps(), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, 0, fmt.Errorf("datagen: %s: %w", rel, err)
	}
	rb := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer rb.Release()
	eb := newEpisodeBuilder(rb, o)
	st := newFeatureStats(o.Dim)
	for ep := f.first; ep < f.end; ep++ {
		if err := ctx.Err(); err != nil {
			fw.Close()
			return nil, 0, fmt.Errorf("datagen: %w", err)
		}
		n := int(p.epLen[ep])
		var el episodeLang
		if o.Density != DensityNone {
			el = p.annotate(ep)
		}
		eb.build(p, ep, &el, st)
		rec := rb.NewRecordBatch()
		err := fw.Write(rec)
		rec.Release()
		if err != nil {
			fw.Close()
			return nil, 0, fmt.Errorf("datagen: %s: episode %d: %w", rel, ep, err)
		}
		report(n)
	}
	if err := fw.Close(); err != nil {
		return nil, 0, fmt.Errorf("datagen: %s: %w", rel, err)
	}
	if err := bw.Flush(); err != nil {
		return nil, 0, fmt.Errorf("datagen: %s: %w", rel, err)
	}
	size, err := fh.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, fmt.Errorf("datagen: %s: %w", rel, err)
	}
	if err := fh.Close(); err != nil {
		return nil, 0, fmt.Errorf("datagen: %s: %w", rel, err)
	}
	return st, size, nil
}

// episodeBuilder fills a record builder with one episode, reusing its
// scratch buffers.
type episodeBuilder struct {
	o                       *Options
	action, state           *array.FixedSizeListBuilder
	actionVals, stateVals   *array.Float32Builder
	ts                      *array.Float32Builder
	frame, episode, idx, ti *array.Int64Builder
	pers, events            *langAppender
	bufA, bufS              []float32
	bufT                    []float32
	bufI                    []int64
}

func newEpisodeBuilder(rb *array.RecordBuilder, o *Options) *episodeBuilder {
	eb := &episodeBuilder{o: o}
	eb.action = rb.Field(0).(*array.FixedSizeListBuilder)
	eb.state = rb.Field(1).(*array.FixedSizeListBuilder)
	eb.actionVals = eb.action.ValueBuilder().(*array.Float32Builder)
	eb.stateVals = eb.state.ValueBuilder().(*array.Float32Builder)
	eb.ts = rb.Field(2).(*array.Float32Builder)
	eb.frame = rb.Field(3).(*array.Int64Builder)
	eb.episode = rb.Field(4).(*array.Int64Builder)
	eb.idx = rb.Field(5).(*array.Int64Builder)
	eb.ti = rb.Field(6).(*array.Int64Builder)
	if o.Density != DensityNone {
		eb.pers = newLangAppender(rb.Field(7), true)
		eb.events = newLangAppender(rb.Field(8), false)
	}
	return eb
}

func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

func (eb *episodeBuilder) build(p *plan, ep int, el *episodeLang, st *featureStats) {
	o := eb.o
	n := int(p.epLen[ep])
	dim := o.Dim
	eb.bufA = grow(eb.bufA, n*dim)
	eb.bufS = grow(eb.bufS, n*dim)
	trajectory(o.Seed, ep, n, dim, o.FPS, eb.bufS, eb.bufA)
	for range n {
		eb.action.Append(true)
		eb.state.Append(true)
	}
	eb.actionVals.AppendValues(eb.bufA, nil)
	eb.stateVals.AppendValues(eb.bufS, nil)

	eb.bufT = grow(eb.bufT, n)
	for f := range n {
		eb.bufT[f] = frameTime(f, o.FPS)
	}
	eb.ts.AppendValues(eb.bufT, nil)
	eb.bufI = grow(eb.bufI, n)
	for f := range n {
		eb.bufI[f] = int64(f)
	}
	eb.frame.AppendValues(eb.bufI, nil)
	for f := range n {
		eb.bufI[f] = int64(ep)
	}
	eb.episode.AppendValues(eb.bufI, nil)
	from := p.epFrom[ep]
	for f := range n {
		eb.bufI[f] = from + int64(f)
	}
	eb.idx.AppendValues(eb.bufI, nil)
	task := int64(p.epTask[ep])
	for f := range n {
		eb.bufI[f] = task
	}
	eb.ti.AppendValues(eb.bufI, nil)
	st.addEpisode(ep, from, task, n, o.FPS, eb.bufS, eb.bufA)

	if eb.pers == nil {
		return
	}
	eb.pers.reserve(n, el.persistent)
	for range n {
		eb.pers.appendList(el.persistent, o.FPS)
	}
	next := 0
	for f := 0; f < n; {
		if next < len(el.events) && el.events[next].frame == f {
			eb.events.appendList(el.events[next].rows, o.FPS)
			next++
			f++
			continue
		}
		end := n
		if next < len(el.events) {
			end = el.events[next].frame
		}
		eb.events.appendEmpty(end - f)
		f = end
	}
}

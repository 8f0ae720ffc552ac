package pipeline

import (
	"context"
	"fmt"
	"sort"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// Config says what to read and how to render it.
type Config struct {
	// Source and Dataset are the dataset's storage and its metadata
	// (shard.OpenDataset).
	Source  fetch.Source
	Dataset *schema.Dataset
	// Recipe renders every frame; Mode decides what becomes of None renders
	// and frames without language. A nil Recipe renders nothing: every
	// frame is kept without messages (outcome Passthrough), as LeRobotDataset
	// yields frames without a RenderMessagesStep, and Mode is ignored.
	Recipe *render.Recipe
	Mode   render.Mode
	// NoTaskAug passes the canonical task explicitly, as LeRobot main's
	// RenderMessagesStep does, which disables task_aug rotation.
	NoTaskAug bool
	// Selection chooses episodes (--episodes / --exclude-episodes).
	Selection shard.Selection
	// Features names the numeric features to read; nil means every numeric
	// feature of info.json.
	Features []string
	// SkipErrors keeps going past frames whose rendering fails (they are
	// counted and grouped in Stats.Skipped) instead of stopping at the first.
	SkipErrors bool
	// MaxErrors, with SkipErrors, fails the run once more than MaxErrors
	// frames failed (0: no limit).
	MaxErrors int64
	// Share restricts the run to one worker's share of the episodes.
	Share Share
	// Workers is the number of units decoded and rendered in parallel
	// (default GOMAXPROCS). Output never depends on it.
	Workers int
	// Deltas gathers features at time offsets within the episode
	// (LeRobot delta_timestamps); Tolerance is the tolerance_s of the
	// offsets (default DefaultTolerance).
	Deltas    []Delta
	Tolerance float64
	// Progress, when set, is called with the number of frames of each
	// chunk as it is handed on, in order (for progress displays).
	Progress func(frames int)
	// Cameras decodes video camera frames and Images image features into
	// every chunk (nil: none; see SetupCameras); CameraStatus lists the dataset's cameras and whether
	// each is decoded, for the header.
	Cameras      *video.Set
	Images       *video.ImageSet
	CameraStatus []sink.Camera
	// PieceBytes bounds the decoded camera frames of one decoding job
	// (default DefaultPieceBytes): longer episodes are decoded in pieces
	// (docs/video.md, "Memory"). Output never depends on it.
	PieceBytes int64
	// StoredFrames keeps each video camera frame in the form its decoder
	// gave it (YUV 4:2:0 planes: half the bytes of RGB) until it is
	// written, where it is converted once, straight into its destination
	// (video.Set.FillStored, collate.Conv): set for training streams,
	// whose shuffle buffer holds and copies the frames. Output never
	// depends on it.
	StoredFrames bool
	// heldFrames are the bytes one frame of each video camera is held in
	// by a training stream, as the decoder gave it (MeasureHeldFrames; nil
	// or 0: unknown, counted in the batch form).
	heldFrames []int64
	// ProgressTotal, when set, is called with the number of frames
	// Progress will count in all once that is known (training iteration:
	// after the pre-pass; 0 for endless --epochs 0).
	ProgressTotal func(total int64)

	// Footers shares data-file footers between the streams of a process
	// (the clients of `serve`) and, through the Hub's cache, the processes
	// of a node; nil gives each plan its own (shard.Footers). Plans never
	// pin footers for the whole run either way.
	Footers *shard.Footers

	// filesPerSegment overrides defaultFilesPerSegment (tests).
	filesPerSegment int
	// minPieceRows overrides minPieceRows (tests).
	minPieceRows int
}

// Share is one of NumWorkers disjoint shares of the selected episodes; the
// shares together cover the selection exactly once. The zero value is the
// whole selection.
type Share struct {
	Worker, NumWorkers int
}

// Chunk is one decoded and rendered unit (a row group, or the part of it
// holding selected episodes; several row groups when an episode spans them),
// handed to the consumer in plan order.
type Chunk struct {
	// Unit is the (first) unit the chunk was read from.
	Unit  shard.Unit
	Batch *shard.Batch
	// Results holds one render result per frame of Batch.
	Results []render.Result
	// Tasks holds each frame's canonical task ("" when its task_index has
	// no task).
	Tasks []string
	// Frames says which video frame each sample got, per decoded camera
	// (nil without cameras).
	Frames    []CameraFrames
	frameBufs [][]byte // the video camera columns' buffers (releaseFrames)
	// frames owns frameBufs once they are filled: batches borrow the
	// camera frames from it (collate.Owner) instead of copying them.
	frames    *frameOwner
	frameCols int // camera and image columns appended to Batch.Features
	// frameConvs[k] are the conversions of camera column k's frames
	// (Config.StoredFrames: video.Set.FillStored), aligned with the
	// column's buffer, whose row convLo is the chunk's first; nil for a
	// column of converted frames (image features, or without
	// StoredFrames).
	frameConvs [][]*video.FrameConv
	convLo     int

	epStart, epEnd []int32   // see episodeBounds
	ext            *pieceExt // a piece of a longer group (see pieces.go)
}

// FrameError is a frame whose rendering failed, with its location.
type FrameError struct {
	Dataset  string
	File     string
	RowGroup int
	Episode  int64
	Index    int64
	Err      error
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("%s: %s row group %d: episode %d, index %d: %v",
		e.Dataset, e.File, e.RowGroup, e.Episode, e.Index, e.Err)
}

// Unwrap returns the render error.
func (e *FrameError) Unwrap() error { return e.Err }

// Run plans the units of cfg's share, decodes and renders them on
// cfg.Workers goroutines, and calls emit with each chunk in plan order on
// the calling goroutine. Render failures are not errors here: they are in
// the chunk's results for the consumer to judge (see Counter).
func Run(ctx context.Context, cfg *Config, emit func(*Chunk) error) error {
	return run(ctx, cfg, func(_ []shard.Unit, c *Chunk) error { return emit(c) })
}

// PlanUnits returns the units Run reads for cfg's selection and share, in
// plan order. It holds every planned file's footer; Run plans a few files
// at a time instead (see planner).
func PlanUnits(ctx context.Context, cfg *Config) ([]shard.Unit, error) {
	var units []shard.Unit
	p, err := newPlanner(cfg)
	if err != nil {
		return nil, err
	}
	for {
		u, ok, err := p.nextUnit(ctx)
		if err != nil || !ok {
			return units, err
		}
		units = append(units, u)
	}
}

func run(ctx context.Context, cfg *Config, emit func([]shard.Unit, *Chunk) error) error {
	p, err := newPlanner(cfg)
	if err != nil {
		return err
	}
	if cfg.Cameras != nil {
		cfg.Cameras.Start(ctx)
		defer cfg.Cameras.Release()
	}
	workers := workerCount(cfg)
	feed := &pieceFeed{cfg: cfg, next: p.nextGroup, rows: pieceRows(cfg)}
	return orderedFeed(ctx, workers, chunkWindow(cfg, workers), feed.nextPiece,
		func(ctx context.Context, pc piece) (*Chunk, error) {
			return decodePiece(ctx, cfg, pc)
		},
		func(pc piece, c *Chunk) error {
			if c.Batch.Len() == 0 && pc.k > 0 {
				return nil // an empty piece (the index overstated the group)
			}
			if cfg.Progress != nil {
				cfg.Progress(c.Batch.Len())
			}
			return emit(pc.g, c)
		})
}

// chunkWindow is how many decoded chunks may wait for the consumer: two
// per worker, one with camera frames (a chunk then holds the frames of a
// piece of at most Config.PieceBytes; see pieces.go and docs/video.md).
func chunkWindow(cfg *Config, workers int) int {
	if cfg.Cameras != nil {
		return workers
	}
	return 2 * workers
}

// defaultFilesPerSegment is how many data files the planner plans at a
// time. A parsed footer holds the metadata of every row group and column
// chunk of its file (about 2 MB for a 100k-frame file), so planning a
// 10M-frame dataset at once would hold ~200 MB of footers for the whole
// run.
const defaultFilesPerSegment = 2

// planner plans cfg's units lazily, a segment of whole data files at a
// time, in the order shard.Plan gives for the whole selection: shard.Plan
// on a copy of the dataset restricted to the episodes indexed in a
// segment's files plans exactly those files' units (each file's units
// depend only on the file's indexed episodes, the selection and its
// footer), and only reads their footers. The units do not hold their
// footers: they find them in the planner's shard.Footers (the config's,
// shared by the process), which keeps those being read and a bounded
// number of others, so a training order holding every unit of its
// selection does not hold every footer.
type planner struct {
	cfg      *Config
	sel      shard.Selection
	segments [][]schema.Episode // episodes indexed in each segment's files
	seq      int                // next unit's Seq over the whole plan
	units    []shard.Unit       // planned, not yet handed out
	ahead    chan planned       // the next segment's plan, when started
	pending  []shard.Unit       // the group being assembled (nextGroup)
	footers  *shard.Footers     // where the units find their footers
}

func newPlanner(cfg *Config) (*planner, error) {
	sel, err := shareSelection(cfg.Dataset, cfg.Selection, cfg.Share)
	if err != nil {
		return nil, err
	}
	per := cfg.filesPerSegment
	if per <= 0 {
		per = defaultFilesPerSegment
	}
	segs, err := planSegments(cfg.Dataset, sel, per)
	if err != nil {
		return nil, err
	}
	footers := cfg.Footers
	if footers == nil {
		footers = shard.NewFooters(0)
	}
	return &planner{cfg: cfg, sel: sel, segments: segs, footers: footers}, nil
}

// planSegments lists the data files holding a selected episode in
// shard.Plan's file order (by their first dataset index, ties in episodes
// index order) and returns their indexed episodes, per files of a segment.
func planSegments(ds *schema.Dataset, sel shard.Selection, perSegment int) ([][]schema.Episode, error) {
	type file struct {
		first    int64
		episodes []schema.Episode
		selected bool
	}
	byPath := map[string]*file{}
	var files []*file
	for _, ep := range ds.Episodes {
		p, err := ds.Info.DataFile(ep.DataChunk, ep.DataFile)
		if err != nil {
			// shard.Plan reports it, with its context.
			return [][]schema.Episode{ds.Episodes}, nil
		}
		f := byPath[p]
		if f == nil {
			f = &file{first: ep.FromIndex}
			byPath[p] = f
			files = append(files, f)
		}
		f.episodes = append(f.episodes, ep)
		f.first = min(f.first, ep.FromIndex)
		f.selected = f.selected || sel.Contains(ep.Index)
	}
	kept := files[:0]
	for _, f := range files {
		if f.selected {
			kept = append(kept, f)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].first < kept[j].first })
	var segs [][]schema.Episode
	for i := 0; i < len(kept); i += perSegment {
		var eps []schema.Episode
		for _, f := range kept[i:min(i+perSegment, len(kept))] {
			eps = append(eps, f.episodes...)
		}
		segs = append(segs, eps)
	}
	return segs, nil
}

// nextUnit returns the next unit of the plan. Segments are planned one
// ahead, in the background, so that reading and parsing footers overlaps
// with the decoding of the previous segment.
func (p *planner) nextUnit(ctx context.Context) (shard.Unit, bool, error) {
	for len(p.units) == 0 {
		if p.ahead == nil {
			if len(p.segments) == 0 {
				return shard.Unit{}, false, nil
			}
			p.planAhead(ctx)
		}
		r := <-p.ahead
		p.ahead = nil
		if r.err != nil {
			return shard.Unit{}, false, r.err
		}
		p.units = r.units
		if len(p.segments) > 0 {
			p.planAhead(ctx)
		}
	}
	u := p.units[0]
	p.units[0] = shard.Unit{}
	p.units = p.units[1:]
	u.Seq = p.seq
	p.seq++
	return u, true, nil
}

// planAhead starts planning the next segment.
func (p *planner) planAhead(ctx context.Context) {
	ds := *p.cfg.Dataset
	ds.Episodes = p.segments[0]
	p.segments[0] = nil
	p.segments = p.segments[1:]
	ch := make(chan planned, 1) // never blocks: the goroutine cannot leak
	p.ahead = ch
	go func() {
		units, err := shard.PlanWith(ctx, p.cfg.Source, &ds, p.sel, shard.PlanOptions{Footers: p.footers})
		ch <- planned{units, err}
	}()
}

type planned struct {
	units []shard.Unit
	err   error
}

// nextGroup returns the next group of units holding whole episodes (see
// groupUnits): consecutive units are grouped while they share an episode,
// across segments too.
func (p *planner) nextGroup(ctx context.Context) ([]shard.Unit, bool, error) {
	for {
		u, ok, err := p.nextUnit(ctx)
		if err != nil {
			return nil, false, err
		}
		if !ok {
			g := p.pending
			p.pending = nil
			return g, len(g) > 0, nil
		}
		if len(p.pending) == 0 || !continues(p.pending[len(p.pending)-1], u) {
			g := p.pending
			p.pending = []shard.Unit{u}
			if len(g) > 0 {
				return g, true, nil
			}
			continue
		}
		p.pending = append(p.pending, u)
	}
}

// renderBatch renders every frame of b. Each distinct persistent list is
// compiled once (normally one per episode). Without a recipe every frame
// passes through without messages (passBatch).
func renderBatch(cfg *Config, u shard.Unit, b *shard.Batch) *Chunk {
	n := b.Len()
	c := &Chunk{Unit: u, Batch: b, Results: make([]render.Result, n), Tasks: make([]string, n)}
	if cfg.Recipe == nil {
		passBatch(cfg, c)
		return c
	}
	// episodes[p+1] is the compiled episode of b.Persistent[p]; [0] is the
	// empty persistent list.
	episodes := make([]*render.Episode, len(b.Persistent)+1)
	epErrs := make([]error, len(b.Persistent)+1)
	compiled := make([]bool, len(b.Persistent)+1)
	lastTask, lastText, lastOK := int64(-1), "", false
	var tmpl render.Frame // the task fields, set once per run of frames with one task
	for i := 0; i < n; i++ {
		p := int32(-1)
		if b.PersistentOf != nil {
			p = b.PersistentOf[i]
		}
		var persistent []schema.Row
		if p >= 0 {
			persistent = b.Persistent[p]
		}
		if !compiled[p+1] {
			episodes[p+1], epErrs[p+1] = cfg.Recipe.Episode(persistent)
			compiled[p+1] = true
		}
		if epErrs[p+1] != nil {
			c.Results[i] = render.Result{Outcome: render.Failed, Err: epErrs[p+1], Component: -1}
			continue
		}
		events := b.EventRows(i)
		if ti := b.TaskIndex[i]; ti != lastTask {
			lastTask = ti
			lastText, lastOK = cfg.Dataset.TaskText(ti)
			// SetCanonicalTask takes its own copy of the task (a heap
			// allocation): once per task change, not once per frame.
			tmpl = render.Frame{}
			if lastOK {
				tmpl.SetCanonicalTask(lastText, cfg.NoTaskAug)
			}
		}
		f := render.Frame{Events: events, T: float64(b.Timestamp[i]), SampleIdx: b.Index[i],
			Task: tmpl.Task, DatasetTask: tmpl.DatasetTask}
		if lastOK {
			c.Tasks[i] = lastText
		}
		c.Results[i] = episodes[p+1].Apply(cfg.Mode, f, len(persistent) > 0 || len(events) > 0)
	}
	return c
}

// passBatch keeps every frame of c without messages (no recipe): each
// result is a Passthrough and each frame gets its canonical task.
func passBatch(cfg *Config, c *Chunk) {
	b := c.Batch
	lastTask, lastText := int64(-1), ""
	for i := range c.Results {
		c.Results[i] = render.Result{Outcome: render.Passthrough, Component: -1}
		if ti := b.TaskIndex[i]; ti != lastTask {
			lastTask = ti
			lastText, _ = cfg.Dataset.TaskText(ti)
		}
		c.Tasks[i] = lastText
	}
}

// FrameErr returns the located error of frame i of c, which must have
// failed.
func (c *Chunk) FrameErr(ds string, i int) *FrameError {
	return &FrameError{
		Dataset: ds, File: c.Unit.File, RowGroup: c.Unit.RowGroup,
		Episode: c.Batch.EpisodeIndex[i], Index: c.Batch.Index[i], Err: c.Results[i].Err,
	}
}

// continues reports whether unit u continues the last episode of prev
// (groupUnits' rule).
func continues(prev, u shard.Unit) bool {
	return len(u.Episodes) > 0 && len(prev.Episodes) > 0 && prev.Episodes[len(prev.Episodes)-1] == u.Episodes[0]
}

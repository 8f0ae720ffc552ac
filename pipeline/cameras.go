package pipeline

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/framecache"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/sink"
	"github.com/lrstream/lrstream/video"
)

// CameraOptions say which cameras to decode (--cameras, --resize).
type CameraOptions struct {
	// Spec is "auto" (default: the cameras whose video files exist),
	// "all", "none" or a comma-separated list of camera keys.
	Spec string
	// ResizeH and ResizeW, when set, resize every camera's frames.
	ResizeH, ResizeW int
	// DepthUnit is the unit of depth cameras' values: "mm" (default,
	// LeRobotDataset's depth_output_unit) or "m".
	DepthUnit string
	// VideoBackend is the LeRobot video backend whose RGB frames FFmpeg
	// reproduces where the two differ: video.BackendTorchcodec (default,
	// "") or video.BackendPyAV (video.FFmpeg.Backend).
	VideoBackend string
	// NewDecoder makes the decoder, called only when a camera is decoded
	// (default video.NewFFmpeg: FFmpeg is needed only then).
	NewDecoder func() (video.Decoder, error)
	// FrameCache, when set, returns the node-local frame cache the
	// decoded frames are kept in and served from (nil: none); it is
	// called only when a video camera is decoded, with the bytes the
	// selection's decoded frames take uncompressed (see
	// framecache.Options.RawEstimate).
	FrameCache func(rawEstimate int64) *framecache.Cache
	// Locate gives local paths of video files (default
	// video.NewMaterializer(cfg.Source, …).Locate: any source).
	Locate video.Locator
}

// SetupCameras resolves o against cfg's dataset and selection and sets
// cfg.Cameras and cfg.CameraStatus. Datasets without video features are
// left as they are.
func SetupCameras(ctx context.Context, cfg *Config, o CameraOptions) error {
	if u := depthUnit(o); u != video.DepthMillimetres && u != video.DepthMetres {
		return fmt.Errorf("--depth-unit %q: want mm or m", u)
	}
	if err := video.CheckBackend(o.VideoBackend); err != nil {
		return fmt.Errorf("--video-backend: %w", err)
	}
	keys := video.Keys(&cfg.Dataset.Info)
	if len(keys) == 0 && len(video.ImageKeys(&cfg.Dataset.Info)) == 0 {
		if o.Spec != "" && o.Spec != video.ModeAuto && o.Spec != video.ModeNone && o.Spec != video.ModeAll {
			return fmt.Errorf("--cameras: %s has no cameras (no video feature in info.json)", cfg.Dataset.ID)
		}
		return nil
	}
	spans, indexErr, err := cameraSpans(ctx, cfg, o, keys)
	if err != nil {
		return err
	}
	eps, err := selectedEpisodes(cfg)
	if err != nil {
		return err
	}
	exists := video.FileExists(ctx, cfg.Source)
	ch, unsupported, err := chooseCameras(cfg, o, spans, eps, exists)
	if err != nil {
		return err
	}
	setCameraStatus(cfg, ch, unsupported, absentReasons(cfg, ch, spans, eps, exists, indexErr), indexErr)
	videoKeys, err := setImageCameras(cfg, o, ch.Decoded)
	if err != nil || len(videoKeys) == 0 {
		return err
	}
	if err := checkVideoSpans(cfg, spans, videoKeys); err != nil {
		return err
	}
	return setVideoCameras(cfg, o, spans, eps, videoKeys)
}

// cameraSpans reads the episodes index's video spans of the video cameras.
// Under auto, an index that cannot locate the videos is not an error: the
// dataset streams without their frames, saying why (indexErr).
func cameraSpans(ctx context.Context, cfg *Config, o CameraOptions, keys []string) (spans []shard.VideoSpan, indexErr, err error) {
	if o.Spec == video.ModeNone || len(keys) == 0 {
		return nil, nil, nil
	}
	spans, err = shard.EpisodeVideos(ctx, cfg.Source, cfg.Dataset)
	if err == nil {
		return spans, nil, nil
	}
	if o.Spec != "" && o.Spec != video.ModeAuto {
		return nil, nil, err
	}
	return nil, err, nil
}

// selectedEpisodes lists the episodes of the run's selection (its share).
func selectedEpisodes(cfg *Config) ([]int64, error) {
	sel, err := shareSelection(cfg.Dataset, cfg.Selection, cfg.Share)
	if err != nil {
		return nil, err
	}
	var eps []int64
	for _, e := range cfg.Dataset.Episodes {
		if sel.Contains(e.Index) {
			eps = append(eps, e.Index)
		}
	}
	return eps, nil
}

// chooseCameras resolves --cameras to the cameras decoded, and the kinds
// lrstream cannot decode (with why). Under all or a list, a camera asked
// for whose files are absent fails here, before any output, not at its
// first frame.
func chooseCameras(cfg *Config, o CameraOptions, spans []shard.VideoSpan, eps []int64, exists func(string) bool) (video.Choice, map[string]string, error) {
	ch, err := video.Resolve(o.Spec, &cfg.Dataset.Info, spans, eps, exists)
	if err != nil {
		return ch, nil, err
	}
	unsupported, err := cameraKinds(cfg, o, &ch)
	if err != nil {
		return ch, nil, err
	}
	if o.Spec != "" && o.Spec != video.ModeAuto && o.Spec != video.ModeNone {
		miss, total, err := absentVideos(&cfg.Dataset.Info, ch.Decoded, spans, eps, exists)
		if err != nil {
			return ch, nil, err
		}
		if len(miss) > 0 {
			return ch, nil, absentVideosError(cfg.Dataset.ID, o.Spec, miss, total)
		}
	}
	return ch, unsupported, nil
}

// absentReasons says why auto leaves a camera out: its first absent file
// (for the preview and CameraNote).
func absentReasons(cfg *Config, ch video.Choice, spans []shard.VideoSpan, eps []int64, exists func(string) bool, indexErr error) map[string]string {
	why := map[string]string{}
	if len(ch.Absent) == 0 || indexErr != nil {
		return why
	}
	miss, _, _ := absentVideos(&cfg.Dataset.Info, ch.Absent, spans, eps, exists)
	for _, m := range miss {
		if _, ok := why[m.key]; !ok {
			why[m.key] = filesAbsent + exampleSep + m.file
		}
	}
	return why
}

// setCameraStatus records, per camera of the dataset, whether it is
// decoded and why not (the header's cameras and the preview).
func setCameraStatus(cfg *Config, ch video.Choice, unsupported, absentWhy map[string]string, indexErr error) {
	decoded := map[string]bool{}
	for _, k := range ch.Decoded {
		decoded[k] = true
	}
	absent := map[string]bool{}
	for _, k := range ch.Absent {
		absent[k] = true
	}
	cfg.CameraStatus = nil
	for _, k := range ch.Available {
		st := sink.Camera{Key: k, Decoded: decoded[k]}
		switch {
		case decoded[k]:
		case unsupported[k] != "":
			st.Reason = unsupported[k]
		case absent[k] && indexErr != nil:
			st.Reason = "episodes index: " + indexErr.Error()
		case absent[k] && absentWhy[k] != "":
			st.Reason = absentWhy[k]
		case absent[k]:
			st.Reason = filesAbsent
		default:
			st.Reason = notSelected
		}
		cfg.CameraStatus = append(cfg.CameraStatus, st)
	}
}

// setImageCameras sets up the decoded image features (cfg.Images) and
// returns the decoded video cameras.
func setImageCameras(cfg *Config, o CameraOptions, decoded []string) ([]string, error) {
	cfg.Cameras, cfg.Images = nil, nil
	var videoKeys []string
	var images *video.ImageSet
	for _, k := range decoded {
		f, _ := cfg.Dataset.Info.Feature(k)
		if f.DType == schema.DTypeVideo {
			videoKeys = append(videoKeys, k)
			continue
		}
		cam, err := video.NewCamera(f, depthUnit(o))
		if err != nil {
			return nil, err
		}
		if images == nil {
			images = &video.ImageSet{Source: cfg.Source, Resize: o.ResizeH > 0 && o.ResizeW > 0}
		}
		if images.Resize {
			cam.H, cam.W = o.ResizeH, o.ResizeW
		}
		images.Cameras = append(images.Cameras, cam)
	}
	cfg.Images = images
	return videoKeys, nil
}

// frameCache returns the frame cache of cfg's video cameras, or nil.
func frameCache(cfg *Config, o CameraOptions, set *video.Set) *video.Frames {
	if o.FrameCache == nil {
		return nil
	}
	frames, _ := selectedMean(cfg)
	var perFrame int64
	for _, c := range set.Cameras {
		perFrame += c.CacheBytes()
	}
	fc := o.FrameCache(frames * perFrame)
	if fc == nil {
		return nil
	}
	src := cfg.Source
	return &video.Frames{Cache: fc, Group: fetch.Label(src),
		Identify: func(ctx context.Context, name string) (string, bool, error) { return fetch.Identity(ctx, src, name) }}
}

// cameraDecoder makes the run's video decoder: o.NewDecoder's, or FFmpeg
// tuned for the workers and cameras (ff is nil for another decoder).
func cameraDecoder(cfg *Config, o CameraOptions, cameras int) (dec video.Decoder, ff *video.FFmpeg, err error) {
	newDec := o.NewDecoder
	if newDec == nil {
		newDec = func() (video.Decoder, error) {
			d, err := video.NewFFmpeg()
			if err != nil {
				return nil, err
			}
			// The workers decode segments in parallel: one decoder
			// thread each keeps FFmpeg from oversubscribing the cores
			// (frame threading costs CPU); one worker lets FFmpeg thread.
			if workerCount(cfg) > 1 {
				d.Threads = 1
			}
			d.Backend = o.VideoBackend
			return d, nil
		}
	}
	if dec, err = newDec(); err != nil {
		return nil, nil, err
	}
	ff, _ = dec.(*video.FFmpeg)
	if ff != nil && ff.MaxIdle == 0 {
		// Processes kept between segments: the next piece of each
		// camera's file continues in the process that decoded the
		// previous one (docs/video.md, "Decoding").
		ff.MaxIdle = 2 * cameras
	}
	if ff != nil && ff.Lanes == 0 {
		// A file decoded by one process at a time keeps about 4/3 of a
		// core busy (ffmpeg's decode and conversion, and a third of a
		// core for lrstream's reading, transpose and batching): with
		// more cores than that per camera, a camera's file is decoded
		// by several processes at once (a piece each) so that the cores
		// keep decoding; with fewer, the workers interleave the cameras
		// and each file needs one (docs/video.md, "Decoding"). (Tuned
		// with RGB24 frames; with YUV frames and borrowed batches a
		// process keeps about 6/5 of a core busy, not re-tuned.)
		ff.Lanes = max(1, 3*workerCount(cfg)/(4*cameras))
	}
	return dec, ff, nil
}

// setVideoCameras builds the video camera set (cfg.Cameras): decoder,
// file locator, tolerance, depth unit, and what releases them.
func setVideoCameras(cfg *Config, o CameraOptions, spans []shard.VideoSpan, eps []int64, videoKeys []string) error {
	dec, ff, err := cameraDecoder(cfg, o, len(videoKeys))
	if err != nil {
		return err
	}
	loc := o.Locate
	var mat *video.Materializer
	if loc == nil {
		// Video files of any source (local, Hub, embedded) through
		// fetch.Materialize, each fetched once while in use; a few idle
		// files are kept for the segments that follow.
		mat = video.NewMaterializer(cfg.Source, len(videoKeys)*(workerCount(cfg)+1))
		loc = mat.Locate
	}
	tol := cfg.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	set, err := video.NewSet(dec, &cfg.Dataset.Info, spans, videoKeys, o.ResizeH, o.ResizeW, tol, loc)
	if err != nil {
		return err
	}
	if mat != nil {
		set.Held = mat.Held // files a segment located: prestarts fetch nothing
	}
	if err := set.SetDepthUnit(depthUnit(o)); err != nil {
		return err
	}
	set.Frames = frameCache(cfg, o, set)
	if len(eps) > 0 {
		// When a run starts (Set.Start), the decoder probes the first
		// episode's files (FFmpeg: pixel format and conversion check);
		// setting up fetches nothing.
		set.PrepareFirst(eps[0])
	}
	closer, _ := dec.(interface{ Close() error })
	if mat != nil || closer != nil {
		set.ReleaseFiles = func() {
			if closer != nil {
				_ = closer.Close() // the processes kept for later segments
			}
			if mat != nil {
				mat.Close()
			}
		}
	}
	cfg.Cameras = set
	if ff != nil {
		// Pieces whose --delta-timestamps windows overlap by the halo
		// share a process when it holds the overlap.
		before, after := cameraHalo(cfg)
		ff.Hold = before + after + 2
	}
	return nil
}

// checkVideoSpans refuses, at startup, an episodes index whose video
// ranges of the decoded cameras disagree with the episodes' lengths or
// overlap within a file (shard.CheckVideoSpans): their frames would be a
// neighbour's. It is an error whatever --on-inconsistent says.
func checkVideoSpans(cfg *Config, spans []shard.VideoSpan, keys []string) error {
	tol := cfg.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	errs := shard.CheckVideoSpans(cfg.Dataset, spans, keys, tol)
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more problems of the episodes index's video ranges; lrstream validate lists them)", errs[0], len(errs)-1)
}

// Reasons of sink.Camera: a camera left out by --cameras, and one whose
// video files are absent (+ exampleSep + the first absent file).
const (
	notSelected = "not selected (--cameras)"
	filesAbsent = "video files absent"
	exampleSep  = ", e.g. "
)

// CameraNote is one line saying which of the dataset's cameras are not
// decoded although --cameras did not leave them out (auto: video files
// absent, or an episodes index that cannot locate them), and how to
// silence it; "" when there is nothing to say. Commands log it on stderr
// unless a terminal preview already shows the cameras' status.
func CameraNote(cfg *Config) string {
	var all, decoded, groups []string
	byReason, example := map[string][]string{}, map[string]string{}
	for _, c := range cfg.CameraStatus {
		all = append(all, c.Key)
		switch {
		case c.Decoded:
			decoded = append(decoded, c.Key)
		case c.Reason != notSelected:
			// Cameras whose files are absent are one group, shown with
			// the first one's example file.
			kind := c.Reason
			if strings.HasPrefix(kind, filesAbsent) {
				kind = filesAbsent
			}
			if byReason[kind] == nil {
				groups = append(groups, kind)
				example[kind] = c.Reason
			}
			byReason[kind] = append(byReason[kind], c.Key)
		}
	}
	if len(groups) == 0 {
		return ""
	}
	var left []string
	for _, r := range groups {
		left = append(left, strings.Join(byReason[r], ", ")+": "+example[r])
	}
	if len(decoded) == 0 && len(groups) == 1 {
		left = []string{example[groups[0]]} // every camera, one reason
	}
	if len(decoded) == 0 {
		return fmt.Sprintf("cameras: %s declares %s; decoding none: %s; --cameras none to silence",
			cfg.Dataset.ID, strings.Join(all, ", "), strings.Join(left, "; "))
	}
	return fmt.Sprintf("cameras: %s declares %s; decoding %s; not decoding %s; --cameras %s to silence",
		cfg.Dataset.ID, strings.Join(all, ", "), strings.Join(decoded, ", "), strings.Join(left, "; "), strings.Join(decoded, ","))
}

// absentVideo is a video file a camera needs for a selected episode that
// the dataset's source does not have.
type absentVideo struct {
	key, file string
	episode   int64 // the first selected episode in it
}

// absentVideos returns the video files of the video features among keys
// (in keys order, then the episodes index's) that the selected episodes
// eps need and exists does not find, and how many distinct files they
// need. Each file is looked up once; exists lists a directory once (a Hub
// source answers from its file listing, downloading nothing).
func absentVideos(info *schema.Info, keys []string, spans []shard.VideoSpan, eps []int64, exists func(string) bool) (miss []absentVideo, total int, err error) {
	sel := make(map[int64]bool, len(eps))
	for _, e := range eps {
		sel[e] = true
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if f, _ := info.Feature(k); f.DType != schema.DTypeVideo {
			continue // image features live in the data files
		}
		for _, sp := range spans {
			if sp.Key != k || !sel[sp.Episode] {
				continue
			}
			name, err := info.VideoFile(k, sp.Chunk, sp.File)
			if err != nil {
				return nil, 0, fmt.Errorf("camera %s, episode %d: %w", k, sp.Episode, err)
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			total++
			if !exists(name) {
				miss = append(miss, absentVideo{key: k, file: name, episode: sp.Episode})
			}
		}
	}
	return miss, total, nil
}

// absentVideosError is the startup error of --cameras all (or a list)
// when video files the selected episodes need are absent: it names the
// first camera and file, counts the others, and says how to go on.
func absentVideosError(dataset, spec string, miss []absentVideo, total int) error {
	first := miss[0]
	var cams []string
	seen := map[string]bool{}
	for _, m := range miss {
		if !seen[m.key] {
			seen[m.key] = true
			cams = append(cams, m.key)
		}
	}
	return fmt.Errorf("--cameras %s: camera %s: video file %s (episode %d) is not in %s; %d of the %d video file(s) the selected episodes need are absent (camera(s) %s): "+
		"this copy of the dataset lacks those videos. Stream without frames with --cameras none, or with --cameras auto (the cameras whose video files exist)",
		spec, first.key, first.file, first.episode, dataset, len(miss), total, strings.Join(cams, ", "))
}

// attachFrames decodes the camera frames (cfg.Cameras, cfg.Images) of
// rows [lo, hi) of gr's group into c, whose Batch holds those rows (c is
// gr's whole chunk, or a piece of it: see pieces.go), and appends them to
// c.Batch.Features as uint8 (C, H, W) columns, after the numeric
// features. A piece also decodes the halo its --delta-timestamps camera
// windows reach (c.ext). A sample whose frame cannot be produced — or
// whose camera window holds a frame that cannot — becomes a failed render
// (counted and skipped with SkipErrors, else the stream's error, naming
// file, camera, episode, index and timestamps).
// turn, when not nil, orders the piece's first camera after its
// predecessor's (cameraTurn).
func attachFrames(ctx context.Context, cfg *Config, gr *groupRead, turn cameraTurn, c *Chunk, lo, hi, piece int) error {
	if cfg.Cameras == nil && cfg.Images == nil {
		return nil
	}
	a := newFrameAttach(cfg, gr.c, c, lo, hi)
	if cfg.Cameras != nil {
		if err := a.videoColumns(ctx, turn, piece); err != nil {
			return err
		}
	}
	if cfg.Images != nil {
		a.imageColumns(gr)
	}
	a.failWindows()
	return nil
}

// frameAttach is one attachFrames call: the rows [lo, hi) of the group
// chunk whole get camera columns in c, decoded over [flo, fhi) (the rows
// plus the --delta-timestamps halo when c is a piece of whole).
type frameAttach struct {
	cfg      *Config
	whole, c *Chunk
	lo, hi   int
	flo, fhi int
	rows     int       // a column buffer's capacity in frames
	failed   [][]error // failed[col][r-flo]: group row r's frame error in camera column col
	windows  [][]int   // the camera columns' --delta-timestamps offsets
}

func newFrameAttach(cfg *Config, whole, c *Chunk, lo, hi int) *frameAttach {
	a := &frameAttach{cfg: cfg, whole: whole, c: c, lo: lo, hi: hi, flo: lo, fhi: hi, rows: hi - lo}
	if c != whole {
		before, after := cameraHalo(cfg)
		a.flo, a.fhi = haloRows(cfg, whole.Batch.Len(), lo, hi)
		a.rows = pieceRows(cfg) + before + after
		x := &pieceExt{lo: lo, start: whole.epStart, end: whole.epEnd}
		for _, f := range whole.Batch.Features {
			x.data = append(x.data, f.Data)
			x.first = append(x.first, 0)
		}
		c.ext = x
	}
	return a
}

// mark fails group row r's sample (when it is one of the chunk's rows).
func (a *frameAttach) mark(r int, err error) {
	if r >= a.lo && r < a.hi && a.c.Results[r-a.lo].Outcome != render.Failed {
		a.c.Results[r-a.lo] = render.Result{Outcome: render.Failed, Err: err, Component: -1}
	}
}

// addColumn adds camera cam's decoded frames buf ([flo, fhi)) as a column,
// with their conversions when they are stored as decoded (nil: converted).
func (a *frameAttach) addColumn(cam video.Camera, buf []byte, convs []*video.FrameConv, errs []error) {
	c, lo, hi, flo := a.c, a.lo, a.hi, a.flo
	c.frameConvs = append(c.frameConvs, convs)
	c.convLo = lo - flo
	fb := cam.FrameBytes()
	c.Batch.Features = append(c.Batch.Features, shard.FeatureData{Name: cam.Key, DType: cam.DType(), Shape: []int{cam.C, cam.H, cam.W},
		Data: buf[(lo-flo)*fb : (hi-flo)*fb : (hi-flo)*fb]})
	c.frameCols++
	if c.ext != nil {
		c.ext.data = append(c.ext.data, buf)
		c.ext.first = append(c.ext.first, flo)
	}
	a.failed = append(a.failed, errs)
	a.windows = append(a.windows, cameraOffsets(a.cfg, cam.Key))
}

// videoColumns decodes every video camera's frames (the first camera in
// the piece's turn, when pieces take turns).
func (a *frameAttach) videoColumns(ctx context.Context, turn cameraTurn, piece int) error {
	set, c, wb := a.cfg.Cameras, a.c, a.whole.Batch
	flo, fhi, lo, hi := a.flo, a.fhi, a.lo, a.hi
	n := fhi - flo
	c.Frames = make([]CameraFrames, len(set.Cameras))
	c.frameBufs = c.frameBufs[:0]
	for k, cam := range set.Cameras {
		fb := cam.FrameBytes()
		data := set.Buffer(n*fb, max(n, a.rows)*fb)
		c.frameBufs = append(c.frameBufs, data)
		cf := &c.Frames[k]
		cf.Camera, cf.File, cf.PTS = cam.Key, make([]string, hi-lo), make([]float64, hi-lo)
		for i := range cf.PTS {
			cf.PTS[i] = math.NaN()
		}
		errs := make([]error, n)
		if turn != nil && k == 0 {
			if err := turn.wait(ctx, piece); err != nil {
				return err
			}
		}
		fail := func(i int, err error) {
			errs[i] = err
			a.mark(flo+i, err)
		}
		matched := func(i int, file string, pts float64) {
			if r := flo + i; r >= lo && r < hi {
				cf.File[r-lo], cf.PTS[r-lo] = file, pts
			}
		}
		var convs []*video.FrameConv
		var err error
		if a.cfg.StoredFrames {
			convs = make([]*video.FrameConv, n)
			err = set.FillStored(ctx, k, wb.EpisodeIndex[flo:fhi], wb.Index[flo:fhi], wb.Timestamp[flo:fhi], data, convs, fail, matched)
		} else {
			err = set.Fill(ctx, k, wb.EpisodeIndex[flo:fhi], wb.Index[flo:fhi], wb.Timestamp[flo:fhi], data, fail, matched)
		}
		if turn != nil && k == 0 {
			turn.finish(piece)
		}
		if err != nil {
			return err
		}
		a.addColumn(cam, data, convs, errs)
	}
	c.frames = newFrameOwner(set, c.frameBufs)
	return nil
}

// imageColumns decodes every image feature's frames.
func (a *frameAttach) imageColumns(gr *groupRead) {
	is, wb := a.cfg.Images, a.whole.Batch
	flo, fhi := a.flo, a.fhi
	n := fhi - flo
	for k, cam := range is.Cameras {
		data := make([]byte, n*cam.FrameBytes())
		errs := make([]error, n)
		is.Fill(a.c.Unit.File, k, wb.EpisodeIndex[flo:fhi], wb.Index[flo:fhi], gr.enc[cam.Key], data, func(i int, err error) {
			errs[i] = err
			a.mark(flo+i, err)
		})
		a.addColumn(cam, data, nil, errs)
	}
}

// failWindows fails a sample whose camera window holds a failed frame (its
// window would otherwise carry a blank frame).
func (a *frameAttach) failWindows() {
	for col, offs := range a.windows {
		if offs == nil {
			continue
		}
		for r := a.lo; r < a.hi; r++ {
			if a.c.Results[r-a.lo].Outcome == render.Failed {
				continue
			}
			s, e := int(a.whole.epStart[r]), int(a.whole.epEnd[r])
			for _, off := range offs {
				q := min(max(r+off, s), e-1)
				if q != r && a.failed[col][q-a.flo] != nil {
					a.mark(r, fmt.Errorf("--delta-timestamps offset %+d: %w", off, a.failed[col][q-a.flo]))
					break
				}
			}
		}
	}
}

// cameraOffsets returns camera key's --delta-timestamps offsets in
// frames (nil without a window), rounded as ResolveDeltas.
func cameraOffsets(cfg *Config, key string) []int {
	for _, d := range cfg.Deltas {
		if d.Key != key {
			continue
		}
		out := make([]int, len(d.Seconds))
		for i, s := range d.Seconds {
			out[i] = int(math.RoundToEven(s * cfg.Dataset.Info.FPS))
		}
		return out
	}
	return nil
}

// readImages reads the encoded images of cfg.Images (image features, in
// the data files) of group g, by camera and dataset index (nil without
// image features).
func readImages(ctx context.Context, cfg *Config, g []shard.Unit) (map[string]map[int64][]byte, error) {
	is := cfg.Images
	if is == nil {
		return nil, nil
	}
	keys := make([]string, len(is.Cameras))
	for k, cam := range is.Cameras {
		keys[k] = cam.Key
	}
	enc := map[string]map[int64][]byte{}
	for _, u := range g {
		m, err := video.ReadImageBytes(ctx, cfg.Source, u.File, u.RowGroup, keys)
		if err != nil {
			return nil, fmt.Errorf("%s: image features: %w", cfg.Dataset.ID, err)
		}
		for k, v := range m {
			if enc[k] == nil {
				enc[k] = v
				continue
			}
			for i, b := range v {
				enc[k][i] = b
			}
		}
	}
	return enc, nil
}

// frameOwner owns a chunk's camera frame buffers (collate.Owner): the
// chunk holds one reference until its samples are batched
// (releaseFrames), and each batch that borrows its frames holds one more
// until the batch is recycled after it is written; the last release hands
// the buffers back to the Set for reuse (reused pages cost no page faults;
// fresh ones cost more than the decode).
type frameOwner struct {
	refs atomic.Int64
	set  *video.Set
	bufs [][]byte
}

func newFrameOwner(set *video.Set, bufs [][]byte) *frameOwner {
	o := &frameOwner{set: set, bufs: slices.Clone(bufs)}
	o.refs.Store(1)
	return o
}

// Retain implements collate.Owner.
func (o *frameOwner) Retain() { o.refs.Add(1) }

// Release implements collate.Owner.
func (o *frameOwner) Release() {
	switch n := o.refs.Add(-1); {
	case n == 0:
		for _, b := range o.bufs {
			o.set.Recycle(b)
		}
		o.bufs = nil
	case n < 0:
		panic("pipeline: camera frames released more often than retained")
	}
}

// releaseFrames drops c's hold on its camera frame buffers: they go back
// for reuse once no batch borrows them either. Nothing may read c's camera
// features afterwards.
func (c *Chunk) releaseFrames(cfg *Config) {
	if c.frames != nil {
		c.frames.Release()
		c.frames = nil
	} else if cfg.Cameras != nil {
		for _, b := range c.frameBufs {
			cfg.Cameras.Recycle(b)
		}
	}
	c.frameBufs = nil
	if n := len(c.Batch.Features) - c.frameCols; n >= 0 {
		c.Batch.Features = c.Batch.Features[:n]
	}
	c.frameCols = 0
	c.frameConvs, c.convLo = nil, 0
	c.ext = nil
}

// frameConv returns the conversion of the frame at row i of camera column
// col's buffer (see Chunk.frameConvs), or nil when its bytes are
// converted.
func (c *Chunk) frameConv(col, i int) *video.FrameConv {
	if col < 0 || col >= len(c.frameConvs) || c.frameConvs[col] == nil {
		return nil
	}
	return c.frameConvs[col][i]
}

// CameraBytesPerSample is the size of one sample's camera and image
// columns in bytes (0 without cameras).
func CameraBytesPerSample(cfg *Config) int64 {
	var n int64
	if cfg.Cameras != nil {
		for _, c := range cfg.Cameras.Cameras {
			n += int64(c.FrameBytes())
		}
	}
	if cfg.Images != nil {
		for _, c := range cfg.Images.Cameras {
			n += int64(c.FrameBytes())
		}
	}
	return n
}

// CameraFrames says which video frame each sample of a chunk got for one
// camera (for inspect): the file and the frame's timestamp in it (NaN
// when the sample has no frame).
type CameraFrames struct {
	Camera string
	File   []string
	PTS    []float64
}

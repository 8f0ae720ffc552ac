package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/framecache"
)

// The frame cache's environment variables (docs/video.md, "Frame cache").
const (
	frameCacheEnv      = "LRSTREAM_FRAME_CACHE"        // on or off: --frame-cache's default
	frameCacheDirEnv   = "LRSTREAM_FRAME_CACHE_DIR"    // --frame-cache-dir's default
	frameCacheGBEnv    = "LRSTREAM_FRAME_CACHE_GB"     // --frame-cache-gb's default
	frameCacheCodecEnv = "LRSTREAM_FRAME_CACHE_CODEC"  // --frame-cache-codec's default
	frameCacheWriteEnv = "LRSTREAM_FRAME_CACHE_WRITES" // --frame-cache-writes' default
)

// defaultFrameCacheCodec is how cached frames are stored by default: raw
// (the fastest to read and store) when the run's frames fit the budget and
// half the RAM, else s2 (docs/video.md, "Frame cache": the stored form).
const defaultFrameCacheCodec = "auto"

// frameCacheFlags are --frame-cache, --frame-cache-dir, --frame-cache-gb,
// --frame-cache-codec and --frame-cache-writes, and the cache they open (once, when a run first
// decodes a video camera; shared by the datasets of a mixture and the
// clients of serve).
type frameCacheFlags struct {
	mode, dir, gb, codec, writes string

	once  sync.Once
	cache *framecache.Cache
	err   error
}

func (f *frameCacheFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "frame-cache", "", "keep decoded camera frames in a node-local cache and serve later epochs, runs and processes from it: on or off (default on, or $"+frameCacheEnv+"; docs/video.md, Frame cache)")
	fs.StringVar(&f.dir, "frame-cache-dir", "", "the frame cache's directory (default $"+frameCacheDirEnv+", else ~/.cache/lrstream/frames)")
	fs.StringVar(&f.codec, "frame-cache-codec", "", "how cached frames are stored: auto (raw when the run's frames fit the budget and half the RAM, else s2), none (raw: the fastest to read and store), s2 (~1.5x fewer bytes on camera footage, several times the CPU per frame) or zstd (default $"+frameCacheCodecEnv+", else auto; docs/video.md, Frame cache)")
	fs.StringVar(&f.writes, "frame-cache-writes", "", "how entries are written: buffered (through the page cache: later epochs read them from memory) or direct (O_DIRECT: less CPU in the first epoch, but an entry's first read comes from the disk) (default $"+frameCacheWriteEnv+", else buffered; docs/video.md, Frame cache)")
	fs.StringVar(&f.gb, "frame-cache-gb", "", "the frame cache's budget in GB (1e9 bytes) of disk; least recently used entries are evicted beyond it (default $"+frameCacheGBEnv+", else 25% of the free disk space, at most 100 GiB)")
}

// options resolves the flags against the environment: ok false when the
// cache is off.
func (f *frameCacheFlags) options(getenv func(string) string, log *slog.Logger) (o framecache.Options, ok bool, err error) {
	mode := f.mode
	if mode == "" && getenv != nil {
		mode = getenv(frameCacheEnv)
	}
	switch mode {
	case "", "on":
	case "off":
		return o, false, nil
	default:
		return o, false, fmt.Errorf("--frame-cache %q: want on or off", mode)
	}
	o.Dir, o.Codec, o.Log = f.dir, f.codec, log
	if o.Dir == "" && getenv != nil {
		o.Dir = getenv(frameCacheDirEnv)
	}
	if o.Codec == "" && getenv != nil {
		o.Codec = getenv(frameCacheCodecEnv)
	}
	switch o.Codec {
	case "":
		o.Codec = defaultFrameCacheCodec
	case "auto", "none", "s2", "zstd":
	default:
		return o, false, fmt.Errorf("--frame-cache-codec %q: want auto, none, s2 or zstd", o.Codec)
	}
	writes := f.writes
	if writes == "" && getenv != nil {
		writes = getenv(frameCacheWriteEnv)
	}
	switch writes {
	case "", "buffered":
	case "direct":
		o.Direct = true
	default:
		return o, false, fmt.Errorf("--frame-cache-writes %q: want buffered or direct", writes)
	}
	gb := f.gb
	if gb == "" && getenv != nil {
		gb = getenv(frameCacheGBEnv)
	}
	if gb != "" {
		g, err := strconv.ParseFloat(strings.TrimSpace(gb), 64)
		if err != nil || !(g > 0) || math.IsInf(g, 0) {
			return o, false, fmt.Errorf("--frame-cache-gb %q: want a positive number of GB", gb)
		}
		o.Budget = int64(g * 1e9)
	}
	return o, true, nil
}

// check validates the flags before a run starts.
func (f *frameCacheFlags) check(e *env) error {
	_, _, err := f.options(e.getenv, nil)
	return err
}

// opener returns the function a run calls when it first decodes a video
// camera: the cache, or nil when it is off or cannot be opened (then
// frames are decoded, with one warning).
func (f *frameCacheFlags) opener(e *env) func(int64) *framecache.Cache {
	return func(rawEstimate int64) *framecache.Cache {
		f.once.Do(func() {
			log := stderrLog(e.stderr)
			o, ok, err := f.options(e.getenv, log)
			if err != nil || !ok {
				f.err = err
				return
			}
			o.RawEstimate = rawEstimate
			if f.cache, err = framecache.Open(o); err != nil {
				log.Warn(fmt.Sprintf("frame cache: %v; camera frames are decoded, not cached", err))
				f.cache = nil
			}
		})
		return f.cache
	}
}

// close closes the cache (recording the run's statistics for `lrstream
// cache`) and, unless quiet, writes one line saying what it served.
func (f *frameCacheFlags) close(w io.Writer, quiet bool) {
	if f.cache == nil {
		return
	}
	st := f.cache.Stats()
	_ = f.cache.Close()
	if quiet || w == nil || st.FramesRead+st.FramesWritten == 0 {
		return
	}
	fmt.Fprintln(w, frameCacheSummary(st, f.cache.Dir()))
}

// frameCacheSummary is the summary line of a run's frame cache use.
func frameCacheSummary(st framecache.Stats, dir string) string {
	total := st.FramesRead + st.FramesWritten
	s := fmt.Sprintf("frame cache: %d of %d frames from the cache (%.1f%%), %d decoded and stored (%s); %s",
		st.FramesRead, total, 100*float64(st.FramesRead)/float64(max(total, 1)), st.FramesWritten, formatGB(st.BytesWritten), dir)
	if st.SlowWrites > 0 {
		s += "; the disk was slow: entries written in the background from then on"
	}
	if st.Dropped > 0 {
		s += fmt.Sprintf("; %d decoded segments not stored (the disk was behind: decoded again next time)", st.Dropped)
	}
	return s
}

func formatGB(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(b)/1e6)
	}
	return fmt.Sprintf("%d bytes", b)
}

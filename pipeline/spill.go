package pipeline

import (
	"fmt"
	"os"

	"github.com/lrstream/lrstream/internal/fsalloc"
)

// spillFile holds the large features of a training stream's held frames
// (heldChunk.own: camera frames, in the form they are stored in) on disk
// instead of in memory (TrainOptions.Spill), from the moment a frame is
// held until its batch is collated, when they are read back into an array
// of the holder's free list (frameBuffer) and served as if they had stayed
// in memory. It changes where frames wait, never which frames a batch
// holds.
//
// The file is private to one stream: created in the spill directory with
// mode 0600 and unlinked at once, so a killed process leaves nothing
// behind. Its space is reused: a frame's slot is free again as soon as the
// frame is read back, and a stream's frames have one stored size per
// source, so the file never holds more than the frames waiting in the
// buffer plus those being collated. Writes and reads are plain pwrite and
// pread through the page cache (docs/training.md, "Memory").
//
// A spillFile is used by one goroutine (the one that holds frames and
// collates batches, serveBatches).
type spillFile struct {
	f    *os.File
	name string
	// free are the offsets of free slots, by slot size.
	free map[int][]int64
	end  int64 // the file's size
	// used is the bytes of the slots in use, peak its largest value
	// (for tests).
	used, peak int64
	// res reserves the file's blocks ahead of its end (internal/fsalloc):
	// the first write of a slot then skips the file system's per-page
	// delayed-allocation bookkeeping.
	res fsalloc.Reserver
	// use, when set, is the stream's reservation of the directory's
	// space (SpillSpace), told the file's size as it grows (with the
	// blocks reserved ahead).
	use *spillUse
}

// openSpill creates a stream's spill file in dir and unlinks it.
func openSpill(dir string) (*spillFile, error) {
	f, err := os.CreateTemp(dir, ".lrstream-spill-*")
	if err != nil {
		return nil, fmt.Errorf("shuffle spill: %w", err)
	}
	name := f.Name()
	if err := os.Remove(name); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("shuffle spill: unlink %s: %w", name, err)
	}
	return &spillFile{f: f, name: name, free: map[int][]int64{}}, nil
}

// slot returns a free slot of n bytes: a freed one of that size, else
// one at the end of the file.
func (s *spillFile) slot(n int) int64 {
	s.used += int64(n)
	s.peak = max(s.peak, s.used)
	if fs := s.free[n]; len(fs) > 0 {
		off := fs[len(fs)-1]
		s.free[n] = fs[:len(fs)-1]
		return off
	}
	off := s.end
	s.res.Ahead(s.f, s.end, int64(n))
	s.end += int64(n)
	if s.use != nil {
		s.use.size.Store(max(s.end, s.res.Reserved())) // the blocks it holds
	}
	return off
}

// put writes parts, one after the other, into a new slot and returns its
// offset. hf names the frame in errors.
func (s *spillFile) put(parts [][]byte, n int, hf *heldFrame) (int64, error) {
	off := s.slot(n)
	at := off
	for _, p := range parts {
		if _, err := s.f.WriteAt(p, at); err != nil {
			s.release(off, n)
			return 0, fmt.Errorf("shuffle spill file %s: %s row group %d: episode %d, index %d: writing %d bytes: %w",
				s.name, hf.chunk.file, hf.chunk.rowGroup, hf.episode, hf.index, n, err)
		}
		at += int64(len(p))
	}
	return off, nil
}

// get reads the slot at off into buf (its length the slot's size) and
// frees the slot.
func (s *spillFile) get(off int64, buf []byte, hf *heldFrame) error {
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("shuffle spill file %s: %s row group %d: episode %d, index %d: reading %d bytes: %w",
			s.name, hf.chunk.file, hf.chunk.rowGroup, hf.episode, hf.index, len(buf), err)
	}
	s.release(off, len(buf))
	return nil
}

// release frees the slot of n bytes at off.
func (s *spillFile) release(off int64, n int) {
	s.used -= int64(n)
	s.free[n] = append(s.free[n], off)
}

// close closes the file (already unlinked: its space goes back).
func (s *spillFile) close() error {
	if s == nil {
		return nil
	}
	return s.f.Close()
}

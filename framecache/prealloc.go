package framecache

// Preallocated writes. An entry written through the page cache (the default) reserves
// its file's blocks ahead of its writes, preallocStep bytes at a time, with fallocate
// (FALLOC_FL_KEEP_SIZE: the file's size stays what is written), and is cut to its size
// before it is published, which frees what was reserved beyond it. Writing into
// reserved blocks spares the kernel the delayed-allocation bookkeeping of every page
// written (ext4 reserves, tracks and later allocates each block as it is dirtied):
// `dd` of 2.2 GB into a new file took 0.34–0.35 s of system time, into a fallocated one
// 0.20–0.25 s, on the machine of docs/performance.md. A file system that refuses it
// (not Linux, tmpfs before 2.6.x, some FUSE and network ones), or a disk too full to
// reserve a step, only turns the reservation off for the entry: the writes go on, and
// a write that then fails fails as it would have.

// preallocStep is how many bytes an entry's blocks are reserved ahead of its writes.
const preallocStep = 32 << 20

// preallocate reserves the blocks of e's next n bytes when they are past what is
// reserved (buffered entries only).
func (e *bgEntry) preallocate(n int64) {
	if e.alloc < 0 || e.size+n <= e.alloc {
		return
	}
	step := max(int64(preallocStep), e.size+n-e.alloc)
	if err := reserve(e.f, e.alloc, step); err != nil {
		e.alloc = -1 // refused: write without reserving
		return
	}
	e.alloc += step
}

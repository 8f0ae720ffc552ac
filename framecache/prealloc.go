package framecache

// Preallocated writes. An entry written through the page cache (the default) reserves
// its file's blocks ahead of its writes (internal/fsalloc: fallocate with
// FALLOC_FL_KEEP_SIZE, 32 MiB at a time; the file's size stays what is written) and is
// cut to its size before it is published, which frees what was reserved beyond it.
// Writing into reserved blocks spares the kernel the delayed-allocation bookkeeping of
// every page written. A refusal only turns the reservation off for the entry.

// preallocate reserves the blocks of e's next n bytes when they are past what is
// reserved (buffered entries only).
func (e *bgEntry) preallocate(n int64) { e.res.Ahead(e.f, e.size, n) }

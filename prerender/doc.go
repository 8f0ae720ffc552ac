// Package prerender renders a whole dataset once into compressed shard
// files and replays them: the offline counterpart of `lrstream stream`.
//
// Run drives pipeline.Stream into a sink that writes the exact batch
// messages `lrstream stream` would write (docs/wire-format.md) into
// zstd-compressed shard files, cut at batch boundaries, with an index
// (index.json) holding the header and end messages, per-shard sizes,
// SHA-256s, batch/sample counts, seq and episode ranges. Runs are crash
// safe and resume where they stopped with byte-identical results; ranks of
// a multi-machine run each render a share of the episodes and Finalize
// merges their indexes. Verify checks a directory against its index, and
// Replay writes any worker's share of the batches back as a complete
// stream, byte-identical to the live stream for a single worker.
//
// The directory layout and formats are documented in docs/prerender.md.
package prerender

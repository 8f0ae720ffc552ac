// Package collate turns a stream of per-frame samples into columnar batches
// with lerobot_collate_fn's semantics.
//
// A Batcher receives one Frame at a time (scalars, the rendered
// *schema.Sample or nil for a frame that carries no messages, and the raw
// little-endian bytes of each numeric feature) and emits Batches of exactly
// Config.BatchSize kept samples; the last one may be short unless
// Config.DropLast. None samples (frames whose rendering returned None) never
// enter a batch; they are only counted.
//
// The invariants mirror upstream lerobot_collate_fn:
//   - messages, message_streams, target_message_indices and the raw language
//     columns stay per-sample lists;
//   - a key present on some samples of a batch but not all is an error
//     (InconsistentError) naming the key, the samples and episodes involved;
//   - every other key is stacked into an array whose dtype and shape must
//     agree across the batch.
//
// Feature bytes are copied into the batch, except large ones (camera
// frames, BorrowMin bytes or more) that a Frame marks as borrowed from an
// Owner: the batch references them (Column.Parts) and retains the owner
// until it is recycled, so the frames are written straight from the
// buffers they were decoded into. A feature may also come in a stored form
// with the Conv that makes its bytes (Frame.Conv: a camera frame as YUV
// 4:2:0 planes, half its RGB bytes): a borrowed one stays a Part with its
// Conv, converted once where the batch is written (sink: into the output
// buffer or a shared-memory arena), a copied one is converted into the
// batch. Column.Len, Bytes and every sink give the converted bytes: a
// batch's bytes never depend on the form its samples were stored in.
//
// CollateJSON applies the same invariants to JSON samples; it runs the
// conformance vectors of collate.jsonl.
package collate

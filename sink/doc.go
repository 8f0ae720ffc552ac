// Package sink writes collated batches out as a stream in lrstream's wire
// format (docs/wire-format.md): one header message, batch messages, then an
// end message — or an error message when the stream fails.
//
// Implementations: NewMsgpack (the binary wire format, for pipes, sockets
// and shard files), NewJSONL (one JSON object per message, for humans and
// debugging) and Discard (counts bytes, for benchmarks). Decoder reads the
// msgpack format back, for tests and shard replay.
//
// Encoding is deterministic: the same messages give the same bytes, map keys
// always come in a fixed or source-preserved order.
//
// Large column payloads (camera frames, LargeArray bytes or more) are not
// copied into the encoded message (Encoded): they are written from the
// batch's columns, each part with its own Write call; a part stored in
// another form (collate.Conv: a frame as its decoder gave it) is converted
// once, into a buffer reused for every part, or with an Arena (serve's
// shared memory) straight into the region Place reserves. The bytes
// written never depend on how a column's samples were stored.
package sink

// Package pipeline wires the stages of lrstream together: it plans which
// row groups to read, decodes and renders them in parallel, restores the
// planned order, and hands the frames to a consumer (the batcher and a sink
// for `stream`/`serve`/`prerender`, a per-frame report for `inspect`).
//
// It is the only package that knows every stage; the stages themselves
// (shard, render, collate, sink) know nothing of each other.
package pipeline

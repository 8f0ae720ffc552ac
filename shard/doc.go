// Package shard reads LeRobot v3 datasets: the metadata (meta/info.json,
// meta/tasks.parquet, the episodes index) and the data parquet files,
// row group by row group, with column projection.
//
// The flow is OpenDataset → Plan → ReadUnit: OpenDataset loads the
// metadata, Plan lists the (file, row group) units that hold selected
// episodes in global index order, and ReadUnit decodes one unit into a
// columnar Batch. Units are independent, so callers may read them
// concurrently; memory is bounded by the row groups in flight.
package shard

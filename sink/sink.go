package sink

import (
	"encoding/json"

	"github.com/lrstream/lrstream/collate"
)

// FormatVersion is the wire format version written in every header.
const FormatVersion = "lrstream/1"

// Message types (the "type" key of every message).
const (
	TypeHeader = "header"
	TypeBatch  = "batch"
	TypeEnd    = "end"
	TypeError  = "error"
)

// Sink receives a stream: Header once, Batch any number of times, then End
// on success or Fail on failure. Implementations are not safe for
// concurrent use.
type Sink interface {
	// Header starts the stream.
	Header(h Header) error
	// Batch writes one batch; the sink does not retain b after returning.
	Batch(b *collate.Batch, meta BatchMeta) error
	// End finishes a successful stream.
	End(e End) error
	// Fail finishes a failed stream with an in-band error message.
	Fail(err error) error
}

// Header describes a stream. Features lists every numeric column of the
// batches in wire order, standard columns included (collate's
// Batcher.Columns), with per-sample shapes.
type Header struct {
	// Format is the wire format version; empty means FormatVersion.
	Format string
	// Version is the lrstream version that wrote the stream.
	Version string
	// Dataset is the dataset id (Hub repo id or local path) and Revision
	// its resolved revision (commit hash, or "" for a local directory).
	Dataset  string
	Revision string
	// Pins are the object versions the run reads, for datasets in an
	// object store (written as the header's "pins" key only when set).
	Pins []DatasetPins
	FPS  int
	// Recipe is the recipe's name (file name or built-in name) and
	// RecipeSHA256 the hex SHA-256 of its bytes.
	Recipe       string
	RecipeSHA256 string
	// Mode is the render mode ("fallback" or "drop"), or ModeNoRecipe
	// (with Recipe and RecipeSHA256 "") when the stream was made without
	// a recipe and no batch carries messages.
	Mode         string
	BatchSize    int
	DropLast     bool
	KeepLanguage bool
	Features     []collate.Feature
	// Strings names the extra per-sample string columns after task
	// (collate Config.Strings), e.g. "dataset" when mixing datasets.
	Strings []string
	// Tools is the tools catalog as JSON (meta/info.json["tools"] or the
	// default); nil is written as nil.
	Tools json.RawMessage
	// Options is a JSON object of the remaining options that shaped the
	// stream (shuffle, seed, episodes...); nil is written as nil.
	Options json.RawMessage
	// Components names the blend components, in recipe order (empty for a
	// message recipe).
	Components []string
	// Share is the part of the dataset this stream covers.
	Share Share
	// Training describes the global order of a training stream (written as
	// the header's "training" key only when set).
	Training *Training
	// Cameras lists the dataset's cameras and whether the batches carry
	// their frames (written only when the dataset has cameras).
	Cameras []Camera
	// SHM says the stream's large columns may come through the client's
	// shared-memory arena (written as the header's "shm" key only when
	// set; docs/wire-format.md "Shared memory").
	SHM bool
}

// ModeNoRecipe is the header mode of a stream made without a recipe:
// nothing is rendered, every frame is kept, and no batch carries
// messages, message_streams or target_message_indices.
const ModeNoRecipe = "none"

// Camera is one camera (video or image feature) of the dataset and
// whether the batches carry its frames, as a uint8 (C, H, W) column named
// Key.
type Camera struct {
	Key     string
	Decoded bool
	// Reason says why a camera is not decoded (terminal preview only: the
	// wire header carries key and decoded, so a stream and its replay
	// agree whatever the reason).
	Reason string
	// Kind ("rgb" or "depth"), DType (numpy dtype: "|u1", "<f4"), Shape
	// (per sample, [C, H, W]) and Unit (depth: "mm" or "m"; "" otherwise)
	// describe a decoded camera's column; written only for decoded cameras.
	Kind, DType string
	Shape       []int
	Unit        string
}

// Training is the header's description of a training stream's order: what
// a client needs to compute exact resume positions (docs/training.md).
type Training struct {
	// Fingerprint identifies the global order (the one in resume tokens).
	Fingerprint string
	// Epoch is the first epoch this stream serves.
	Epoch int64
	// EpochBatches is the number of global batches of epoch Epoch (before
	// the cut to a multiple of Consumers: each consumer gets
	// EpochBatches/Consumers of them).
	EpochBatches int64
	// Consumers is world_size × num_workers.
	Consumers int64
}

// Share identifies which share of the episodes a stream carries.
type Share struct {
	Rank, WorldSize, Worker, NumWorkers int
}

// BatchMeta is the per-batch envelope.
type BatchMeta struct {
	// Seq numbers batches from 0 within a stream.
	Seq int64
	// Epoch is the epoch the batch belongs to (0-based).
	Epoch int64
	// Resume is the opaque resume token continuing after this batch; empty
	// is written as nil (resume not supported by the producer).
	Resume string
}

// End carries a finished stream's counts.
type End struct {
	// Frames read; of them Rendered (messages produced), Dropped (render
	// returned None, not in any batch), Passthrough (kept without
	// messages), Skipped (not selected / filtered before rendering) and
	// Errors (frames whose rendering failed, when errors are tolerated).
	Frames, Rendered, Dropped, Passthrough, Skipped, Errors int64
	// Batches and Samples written.
	Batches, Samples int64
	// Components counts rendered samples per blend component, in the
	// header's component order.
	Components []ComponentCount
}

// ComponentCount is the number of samples rendered by one blend component.
type ComponentCount struct {
	Name  string
	Count int64
}

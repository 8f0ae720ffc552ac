package sink

import (
	"fmt"
	"io"

	"github.com/lrstream/lrstream/schema"
)

// Hello is the map a socket client sends once after connecting (see
// docs/wire-format.md, "Socket protocol").
type Hello struct {
	Worker, NumWorkers int
	Rank, WorldSize    int
	// Resume is the resume token to continue from; "" starts at the
	// beginning.
	Resume string
	// Position, when set (hello keys "epoch", "next" and optionally
	// "fingerprint"), asks for one epoch of the training order starting at
	// a given index of the rank's batch sequence (docs/wire-format.md).
	Position *Position
	// SHM is the size in bytes of the shared-memory arena the client
	// offers (its memfd travels with the hello as SCM_RIGHTS), or 0
	// (docs/wire-format.md "Shared memory").
	SHM int64
}

// MinSHM and MaxSHM bound a hello's shm arena size, a multiple of
// SHMAlign (so that every region of the arena starts SHMAlign-aligned).
const (
	MinSHM   = 1 << 20
	MaxSHM   = 64 << 30
	SHMAlign = 4096
)

// Position is an exact start within one epoch: the client serves the
// rank's batches with rank-sequence index Next, Next+num_workers, … of
// epoch Epoch. Fingerprint, when not empty, must match the run's.
type Position struct {
	Epoch, Next int64
	Fingerprint string
}

// MaxConsumers is the largest number of consumers a hello may describe:
// num_workers × world_size must not exceed it (and each of them neither).
// Larger values are refused rather than left to overflow the share
// arithmetic (a product of 2^32 × 2^32 wraps to 0).
const MaxConsumers = 1 << 20

// maxHelloBytes bounds a hello message.
const maxHelloBytes = 64 << 10

// AppendHello appends h as a msgpack map to dst (the resume key only when
// set).
func AppendHello(dst []byte, h Hello) []byte {
	n := 4
	if h.Resume != "" {
		n++
	}
	if h.Position != nil {
		n += 3
	}
	if h.SHM != 0 {
		n++
	}
	b := mpMapHeader(dst, n)
	b = mpStr(b, "worker")
	b = mpInt(b, int64(h.Worker))
	b = mpStr(b, "num_workers")
	b = mpInt(b, int64(h.NumWorkers))
	b = mpStr(b, "rank")
	b = mpInt(b, int64(h.Rank))
	b = mpStr(b, "world_size")
	b = mpInt(b, int64(h.WorldSize))
	if h.Resume != "" {
		b = mpStr(b, "resume")
		b = mpStr(b, h.Resume)
	}
	if p := h.Position; p != nil {
		b = mpStr(b, "epoch")
		b = mpInt(b, p.Epoch)
		b = mpStr(b, "next")
		b = mpInt(b, p.Next)
		b = mpStr(b, "fingerprint")
		b = mpStr(b, p.Fingerprint)
	}
	if h.SHM != 0 {
		b = mpStr(b, "shm")
		b = mpInt(b, h.SHM)
	}
	return b
}

// ReadHello reads and validates one hello map from r. Missing keys take
// their defaults (worker 0 of 1, rank 0 of 1); unknown keys are ignored.
// It reads nothing beyond what the client sent before waiting for the
// stream.
func ReadHello(r io.Reader) (Hello, error) {
	p := helloParser{h: Hello{NumWorkers: 1, WorldSize: 1}, pos: &Position{}}
	d := &Decoder{r: io.LimitReader(r, maxHelloBytes)}
	v, err := d.value(0)
	if err != nil {
		return p.h, fmt.Errorf("sink: reading hello: %w", err)
	}
	m, ok := v.(schema.Map)
	if !ok {
		return p.h, fmt.Errorf("sink: hello is a %T, want a map", v)
	}
	for i, k := range m.Keys {
		if err := p.field(k, m.Values[i]); err != nil {
			return p.h, err
		}
	}
	if err := p.position(); err != nil {
		return p.h, err
	}
	return p.h, CheckShare(p.h)
}

// helloParser is the hello being read: the fields read so far and the
// resume position.
type helloParser struct {
	h                 Hello
	pos               *Position
	hasEpoch, hasNext bool
}

// field sets hello field k to val, checking its type and range; unknown
// fields are ignored.
func (p *helloParser) field(k string, val any) error {
	h, pos := &p.h, p.pos
	var dst *int
	switch k {
	case "epoch", "next":
		n, ok := val.(int64)
		if !ok || n < 0 {
			return fmt.Errorf("sink: hello %s is %v, want an integer >= 0", k, val)
		}
		if k == "epoch" {
			pos.Epoch, p.hasEpoch = n, true
		} else {
			pos.Next, p.hasNext = n, true
		}
		return nil
	case "shm":
		n, ok := val.(int64)
		if !ok || n < MinSHM || n > MaxSHM || n%SHMAlign != 0 {
			return fmt.Errorf("sink: hello shm is %v, want an arena size from %d to %d bytes, a multiple of %d", val, int64(MinSHM), int64(MaxSHM), SHMAlign)
		}
		h.SHM = n
		return nil
	case "fingerprint":
		s, ok := val.(string)
		if !ok {
			return fmt.Errorf("sink: hello fingerprint is a %T, want a string", val)
		}
		pos.Fingerprint = s
		return nil
	case "worker":
		dst = &h.Worker
	case "num_workers":
		dst = &h.NumWorkers
	case "rank":
		dst = &h.Rank
	case "world_size":
		dst = &h.WorldSize
	case "resume":
		switch s := val.(type) {
		case nil:
		case string:
			h.Resume = s
		default:
			return fmt.Errorf("sink: hello resume is a %T, want a string", val)
		}
		return nil
	default:
		return nil
	}
	n, ok := val.(int64)
	if !ok {
		return fmt.Errorf("sink: hello %s is a %T, want an integer", k, val)
	}
	if n < -MaxConsumers || n > MaxConsumers {
		return fmt.Errorf("sink: hello %s = %d is out of range (at most %d)", k, n, MaxConsumers)
	}
	*dst = int(n)
	return nil
}

// position checks the resume fields read (epoch and next, or resume,
// fingerprint only with epoch) and sets the hello's Position.
func (p *helloParser) position() error {
	h, pos := &p.h, p.pos
	switch {
	case p.hasNext && !p.hasEpoch:
		return fmt.Errorf("sink: hello has next without epoch")
	case p.hasEpoch && h.Resume != "":
		return fmt.Errorf("sink: hello has both epoch and resume; send one")
	case p.hasEpoch:
		if !p.hasNext {
			pos.Next = int64(h.Worker) // the worker's first batch of the epoch
		}
		h.Position = pos
	case pos.Fingerprint != "":
		return fmt.Errorf("sink: hello has fingerprint without epoch")
	}
	return nil
}

// CheckShare checks the share a hello asks for: 1 <= num_workers,
// 0 <= worker < num_workers, 1 <= world_size, 0 <= rank < world_size, and
// num_workers × world_size <= MaxConsumers.
func CheckShare(h Hello) error {
	switch {
	case h.NumWorkers < 1:
		return fmt.Errorf("sink: hello num_workers must be >= 1, got %d", h.NumWorkers)
	case h.Worker < 0 || h.Worker >= h.NumWorkers:
		return fmt.Errorf("sink: hello worker %d out of range [0, %d)", h.Worker, h.NumWorkers)
	case h.WorldSize < 1:
		return fmt.Errorf("sink: hello world_size must be >= 1, got %d", h.WorldSize)
	case h.Rank < 0 || h.Rank >= h.WorldSize:
		return fmt.Errorf("sink: hello rank %d out of range [0, %d)", h.Rank, h.WorldSize)
	case h.NumWorkers > MaxConsumers || h.WorldSize > MaxConsumers || h.NumWorkers*h.WorldSize > MaxConsumers:
		return fmt.Errorf("sink: hello num_workers %d × world_size %d exceeds %d consumers", h.NumWorkers, h.WorldSize, MaxConsumers)
	}
	return nil
}

package collate

import (
	"fmt"
	"strings"
)

// InconsistentError reports a key carried by some samples of a batch but
// not all, as lerobot_collate_fn refuses it.
type InconsistentError struct {
	// Key is the offending key, e.g. "messages".
	Key string
	// Have is how many samples carry Key; N is the batch size.
	Have, N int
	// Positions are the in-batch positions of the samples that carry Key
	// (when they are the minority) or lack it, at most maxListed of them.
	Positions []int
	// Carry says whether Positions lists the samples that carry Key (true)
	// or those that lack it (false).
	Carry bool
	// Indices and Episodes are the dataset index and episode index of the
	// samples at Positions, when known (empty for JSON samples).
	Indices, Episodes []int64
}

// maxListed bounds how many samples an InconsistentError names.
const maxListed = 8

// Error mirrors lerobot_collate_fn's message, followed by the samples
// involved and a hint.
func (e *InconsistentError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Inconsistent batch: %d/%d samples carry '%s'; every sample in a batch must agree.", e.Have, e.N, e.Key)
	if len(e.Positions) > 0 {
		if e.Carry {
			sb.WriteString(" Samples carrying it: ")
		} else {
			sb.WriteString(" Samples without it: ")
		}
		for i, p := range e.Positions {
			if i > 0 {
				sb.WriteString(", ")
			}
			if i < len(e.Indices) {
				fmt.Fprintf(&sb, "index %d (episode %d)", e.Indices[i], e.Episodes[i])
			} else {
				fmt.Fprintf(&sb, "batch position %d", p)
			}
		}
		listed := e.Have
		if !e.Carry {
			listed = e.N - e.Have
		}
		if listed > len(e.Positions) {
			fmt.Fprintf(&sb, " and %d more", listed-len(e.Positions))
		}
		sb.WriteString(".")
	}
	if e.Key == KeyMessages || e.Key == KeyMessageStreams || e.Key == KeyTargetMessages {
		sb.WriteString(" Rendered and passthrough frames cannot share a batch; use --mode fallback so every frame renders.")
	} else {
		sb.WriteString(" Use --mode fallback so every sample has the same keys.")
	}
	return sb.String()
}

// checkPresence builds the InconsistentError for a key carried by have of
// the n samples, where has(i) says whether sample i carries it; nil when
// all or none carry it.
func checkPresence(key string, have, n int, has func(i int) bool) *InconsistentError {
	if have == 0 || have == n {
		return nil
	}
	e := &InconsistentError{Key: key, Have: have, N: n, Carry: have*2 <= n}
	for i := 0; i < n && len(e.Positions) < maxListed; i++ {
		if has(i) == e.Carry {
			e.Positions = append(e.Positions, i)
		}
	}
	return e
}

// MismatchError reports a stacked key whose dtype or shape differs between
// samples of a batch.
type MismatchError struct {
	Key string
	// Position is the in-batch position of the first disagreeing sample;
	// Index and Episode identify it when known (HasIndex).
	Position       int
	Index, Episode int64
	HasIndex       bool
	Want, Got      string
	What           string // "dtype" or "shape" (or "size" for raw bytes)
}

// Error describes the disagreement.
func (e *MismatchError) Error() string {
	where := fmt.Sprintf("batch position %d", e.Position)
	if e.HasIndex {
		where = fmt.Sprintf("index %d (episode %d)", e.Index, e.Episode)
	}
	if e.What == "shape" && !e.HasIndex {
		// torch.stack's wording, as upstream reports it.
		return fmt.Sprintf("Inconsistent batch: key '%s': stack expects each tensor to be equal size, but got %s at entry 0 and %s at entry %d", e.Key, e.Want, e.Got, e.Position)
	}
	return fmt.Sprintf("Inconsistent batch: key '%s' has %s %s at %s but %s earlier in the batch; stacked keys must have the same dtype and shape in every sample.", e.Key, e.What, e.Got, where, e.Want)
}

package order

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// State is where a consumer's stream continues: global batch Batch of
// epoch Epoch, every global batch before it consumed. A Plan reports the
// State after each of its batches (Plan.After); Options.Resume restores
// one (as a token).
type State struct {
	Epoch, Batch int64
}

// Token encodes s as a resume token of the run fingerprinted fp.
func (s State) Token(fp string) string {
	return token{Version: 1, Epoch: s.Epoch, Batch: s.Batch, Fingerprint: fp}.encode()
}

// token is the decoded form of a resume token: continue with global batch
// Batch of epoch Epoch, in the order identified by Fingerprint.
type token struct {
	Version     int    `json:"v"`
	Epoch       int64  `json:"e"`
	Batch       int64  `json:"b"`
	Fingerprint string `json:"f"`
}

func (t token) encode() string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken decodes a resume token into its state and the fingerprint of
// the run it belongs to.
func ParseToken(s string) (State, string, error) {
	var t token
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Version != 1 || t.Epoch < 0 || t.Batch < 0 {
		return State{}, "", fmt.Errorf("invalid resume token %q", s)
	}
	return State{Epoch: t.Epoch, Batch: t.Batch}, t.Fingerprint, nil
}

// Position is an exact place in a rank's batch sequence (a socket hello's
// "epoch"/"next"): the rank's batches are its consumers' global batches in
// increasing order (what a DataLoader's worker round-robin yields), and a
// stream from a Position serves the rank-sequence indices Next,
// Next+Workers, Next+2*Workers, … of Epoch, and that epoch only.
// Fingerprint, when set, must be the run's.
type Position struct {
	Epoch, Next int64
	Fingerprint string
}

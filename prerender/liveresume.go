package prerender

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// liveToken is the part of a live stream's resume token (pipeline's
// training iteration) a replay needs: the run's fingerprint, the epoch and
// the epoch's next batch.
type liveToken struct {
	Version     int    `json:"v"`
	Epoch       int64  `json:"e"`
	Batch       int64  `json:"b"`
	Fingerprint string `json:"f"`
}

// IsLiveToken reports whether s is shaped like a live stream's resume
// token (not a replay token).
func IsLiveToken(s string) bool {
	_, err := parseLiveToken(s)
	return err == nil
}

func parseLiveToken(s string) (liveToken, error) {
	var t liveToken
	if strings.HasPrefix(s, replayTokenPrefix) {
		return t, errors.New("a replay resume token, not a live stream's")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Version != 1 || t.Epoch < 0 || t.Batch < 0 {
		return t, fmt.Errorf("invalid resume token %q", s)
	}
	return t, nil
}

// liveResumeStart returns the global batch a plain replay of a training
// pre-render resumes at for tok, a resume token its stored batches carry
// (the live stream's, copied as stored): the batch after the one carrying
// tok. It checks the token against the stored header and that the stored
// batch before that position carries exactly tok.
func (r *replayer) liveResumeStart(ctx context.Context, dir string, x *Index, hdr []byte, tok string) (int64, error) {
	t, err := parseLiveToken(tok)
	if err != nil {
		return 0, err
	}
	h, err := decodeOne(hdr)
	if err != nil || h.Header == nil {
		return 0, fmt.Errorf("header: %v", err)
	}
	tr := h.Header.Training
	switch {
	case tr == nil:
		return 0, errors.New("the resume token is not one of this directory's: it was pre-rendered without --shuffle/--epochs, so its batches carry no resume token")
	case tr.Fingerprint != t.Fingerprint:
		return 0, fmt.Errorf("the resume token belongs to another run (fingerprint %s; this directory's is %s)", t.Fingerprint, tr.Fingerprint)
	case tr.Consumers != 1 || len(x.Ranks) != 1:
		return 0, errors.New("the resume token resumes a multi-consumer run: replay it with its own flags")
	}
	g := t.Epoch*tr.EpochBatches + t.Batch
	if g > x.Totals.Batches {
		return 0, fmt.Errorf("the resume token points at batch %d; the directory holds %d", g, x.Totals.Batches)
	}
	if g == 0 {
		return 0, nil
	}
	// The batch before g must carry tok itself.
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	var first int64
	for _, s := range x.Shards {
		if g-1 >= first+s.Batches {
			first += s.Batches
			continue
		}
		var got string
		err := r.eachBatch(ctx, dec, dir, s, func(k int64, raw []byte, _ batchInfo) error {
			if first+k < g-1 {
				return nil
			}
			m, err := decodeOne(raw)
			if err != nil || m.Batch == nil {
				return fmt.Errorf("batch %d: %v", first+k, err)
			}
			got = m.Batch.Meta.Resume
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return 0, err
		}
		if got != tok {
			return 0, fmt.Errorf("the resume token is not one this directory's batches carry (batch %d carries %q)", g-1, got)
		}
		return g, nil
	}
	return 0, fmt.Errorf("the resume token points at batch %d; the directory holds %d", g, x.Totals.Batches)
}

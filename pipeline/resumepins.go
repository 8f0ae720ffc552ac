package pipeline

import (
	"fmt"

	"github.com/lrstream/lrstream/order"
)

// revisionExplainer is a source that keeps its earlier listings
// (objstore.Source: s3://, hf://buckets/) and can say which objects
// changed since one of them.
type revisionExplainer interface {
	PastRevisions() []string
	ExplainRevision(old string) (string, bool)
}

// explainResume turns the refusal err of a resume token or position of
// another run into one naming the objects that changed, when the run it
// belongs to differs from this one only by the revision of one object
// store dataset whose earlier listing the cache keeps: the token's
// fingerprint is then this run's with that revision. Otherwise, or when
// err is not such a refusal, err is returned as is.
func explainResume(err error, srcs []Mix, so StreamOptions, ts trainStart) error {
	if err == nil {
		return nil
	}
	fp, what := "", ""
	switch to := ts.to; {
	case to.Resume != "":
		if _, tfp, perr := order.ParseToken(to.Resume); perr == nil {
			fp, what = tfp, "resume token"
		}
	case to.Position != nil:
		fp, what = to.Position.Fingerprint, "resume position"
	}
	if fp == "" || fp == ts.fp {
		return err
	}
	if msg := explainWindowBuffer(srcs, so, ts, fp); msg != "" {
		return &changedError{msg: what + msg, err: err}
	}
	for i, m := range srcs {
		ex, ok := m.Config.Source.(revisionExplainer)
		if !ok {
			continue
		}
		for _, rev := range ex.PastRevisions() {
			if rev == m.Config.Dataset.Revision || fingerprint(withRevision(srcs, i, rev), so, ts.to) != fp {
				continue
			}
			if msg, ok := ex.ExplainRevision(rev); ok {
				return &changedError{msg: what + " belongs to a run of another version of the dataset: " + msg, err: err}
			}
		}
	}
	return err
}

// withRevision is srcs with dataset i at revision rev (copies; srcs is
// not changed).
func withRevision(srcs []Mix, i int, rev string) []Mix {
	out := append([]Mix(nil), srcs...)
	cfg := *srcs[i].Config
	ds := *cfg.Dataset
	ds.Revision = rev
	cfg.Dataset = &ds
	out[i].Config = &cfg
	return out
}

// changedError is a resume refused because objects changed: its message
// names them; it unwraps to the order's refusal.
type changedError struct {
	msg string
	err error
}

func (e *changedError) Error() string { return e.msg }
func (e *changedError) Unwrap() error { return e.err }

// explainWindowBuffer says why a resume token or position of fingerprint
// fp is refused when it was taken by a build that sized the shuffle
// buffer of a --delta-timestamps camera window as one frame per camera
// (waitingSampleBytes): such a run's buffer, and so its order and
// fingerprint, differ from this build's. It names the options that
// continue that run's order when there are some. "" when fp is not such
// a run's.
func explainWindowBuffer(srcs []Mix, so StreamOptions, ts trainStart, fp string) string {
	if ts.orig.oneFramePerWindow || !ts.orig.Shuffle || !hasCameraWindow(srcs) {
		return ""
	}
	old := ts.orig
	old.oneFramePerWindow = true
	was, _ := trainSetup(srcs, so, old)
	if was.fp != fp {
		return ""
	}
	msg := fmt.Sprintf(" was taken by an earlier lrstream that counted one frame per camera of a --delta-timestamps camera window in the shuffle buffer's byte budget: its buffer was %d frames, this build's is %d (the budget now holds the whole windows)",
		was.to.BufferSize, ts.to.BufferSize)
	same := ts.orig
	same.BufferSize, same.BufferBytes = was.to.BufferSize, -1
	if now, _ := trainSetup(srcs, so, same); now.fp == fp {
		frames, sample := bufferFrames(srcs, now.to)
		msg += fmt.Sprintf("; to continue that run's order, resume with --shuffle-buffer %d --shuffle-buffer-bytes 0 (TrainOptions.BufferSize %d, BufferBytes -1), whose buffer then holds up to %d bytes",
			frames, frames, int64(frames)*sample)
	}
	return msg
}

// hasCameraWindow reports whether a camera of srcs has a
// --delta-timestamps window.
func hasCameraWindow(srcs []Mix) bool {
	for _, m := range srcs {
		if cameraPadBytes(m.Config) > 0 {
			return true
		}
	}
	return false
}

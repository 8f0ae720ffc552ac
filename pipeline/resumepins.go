package pipeline

import (
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

package sink

import (
	"testing"

	"github.com/lrstream/lrstream/collate"
)

// BenchmarkEncodeBatch encodes batches of 256 realistic samples (4-5
// messages, one tool call in three, 14-dim state and action); ns/op is per
// frame.
func BenchmarkEncodeBatch(b *testing.B) {
	const bs = 256
	bt, err := collate.NewBatcher(collate.Config{BatchSize: bs, Features: fixtureFeatures[:2], Strings: []string{"dataset"}})
	if err != nil {
		b.Fatal(err)
	}
	var batch *collate.Batch
	for i := 0; batch == nil; i++ {
		f := fixtureFrame(i)
		f.Features = f.Features[:2]
		if batch, err = bt.Add(f); err != nil {
			b.Fatal(err)
		}
	}
	s := Discard()
	if err := s.Header(fixtureHeader(bt)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	frames := 0
	for frames < b.N {
		if err := s.Batch(batch, BatchMeta{Seq: int64(frames)}); err != nil {
			b.Fatal(err)
		}
		frames += bs
	}
	b.StopTimer()
	b.ReportMetric(float64(s.BytesWritten())/float64(frames), "B/frame")
}

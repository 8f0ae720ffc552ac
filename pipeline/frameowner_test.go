package pipeline

import (
	"testing"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/video"
)

// TestFrameOwner checks that a chunk's camera buffers go back to the Set
// only when the chunk and every batch that borrowed them have released
// them, and that releasing more often than retaining is caught.
func TestFrameOwner(t *testing.T) {
	set, err := video.NewSet(nil, &schema.Info{}, nil, nil, 0, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	o := newFrameOwner(set, [][]byte{buf})
	o.Retain()  // a batch
	o.Retain()  // another batch
	o.Release() // the chunk (releaseFrames)
	o.Release()
	if got := set.Buffer(64, 64); &got[0] == &buf[0] {
		t.Fatal("buffer recycled while a batch still borrows it")
	}
	o.Release() // the last batch
	if got := set.Buffer(64, 64); &got[0] != &buf[0] {
		t.Fatal("buffer not recycled after the last release")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a release without a retain did not panic")
		}
	}()
	o.Release()
}

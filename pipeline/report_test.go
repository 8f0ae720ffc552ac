package pipeline

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrorGroups checks that failed frames are grouped by root message
// with bounded memory (issue 16 item 5).
func TestErrorGroups(t *testing.T) {
	for _, tc := range []struct {
		name                string
		msgs                int // distinct messages
		perMsg              int
		wantGroups          int
		wantOther, wantEach int64
	}{
		{"one message", 1, 180960, 1, 0, 180960},
		{"few messages", 3, 10, 3, 0, 10},
		{"too many messages", MaxErrorGroups + 7, 2, MaxErrorGroups, 14, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g ErrorGroups
			for i := 0; i < tc.perMsg; i++ {
				for m := 0; m < tc.msgs; m++ {
					g.Add(&FrameError{Dataset: "d", File: "f", Index: int64(i), Err: fmt.Errorf("render: %w", errors.New(fmt.Sprint("boom ", m)))})
				}
			}
			if len(g.Groups) != tc.wantGroups || g.Other != tc.wantOther || g.Total() != int64(tc.msgs*tc.perMsg) {
				t.Fatalf("groups %d other %d total %d", len(g.Groups), g.Other, g.Total())
			}
			for i, gr := range g.Groups {
				if gr.Message != fmt.Sprint("boom ", i) || gr.Count != tc.wantEach || len(gr.First) != min(tc.perMsg, MaxGroupFrames) || gr.First[0].Index != 0 {
					t.Errorf("group %d: %q count %d first %d", i, gr.Message, gr.Count, len(gr.First))
				}
			}
		})
	}
}

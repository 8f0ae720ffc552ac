package shard

import (
	"slices"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/schema"
)

func TestEvalSplit(t *testing.T) {
	// tasks by episode: a b a c a b - a   (episode 6 has no task)
	tasks := [][]string{{"a"}, {"b", "x"}, {"a"}, {"c"}, {"a"}, {"b"}, nil, {"a"}}
	ds := &schema.Dataset{}
	for i, ts := range tasks {
		ds.Episodes = append(ds.Episodes, schema.Episode{Index: int64(i), Tasks: ts})
	}
	cases := []struct {
		frac        float64
		sel         string
		train, eval []int64
		err         string
	}{
		{frac: 0, train: []int64{0, 2, 4, 7, 1, 5, 3, 6}},
		// a: 0,2,4,7 -> ceil(4*.25)=1 eval (7); b: 1,5 -> 1 (5); c: 3 -> 1 (3); "": 6 -> 1 (6)
		{frac: 0.25, train: []int64{0, 2, 4, 1}, eval: []int64{7, 5, 3, 6}},
		{frac: 0.5, sel: "0-4", train: []int64{0}, eval: []int64{2, 4, 1, 3}},
		{frac: 0.1, sel: "3", err: "leaves 0 training episodes"},
		{frac: 1, err: "[0.0, 1.0)"},
		{frac: -0.1, err: "[0.0, 1.0)"},
	}
	for _, c := range cases {
		sel, err := ParseSelection(c.sel, "")
		if err != nil {
			t.Fatal(err)
		}
		train, eval, err := EvalSplit(ds, sel, c.frac)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %q: err %v, want %q", c.frac, c.sel, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(train, c.train) || !slices.Equal(eval, c.eval) {
			t.Errorf("%v %q: train %v eval %v (%v), want %v %v", c.frac, c.sel, train, eval, err, c.train, c.eval)
		}
	}
	s, err := SplitSelection(ds, Selection{}, 0.25, "eval")
	if err != nil || s.Episodes.String() != "3,5-7" {
		t.Errorf("eval selection %v, %v", s.Episodes, err)
	}
	if _, err := SplitSelection(ds, Selection{}, 0.25, "test"); err == nil {
		t.Error("--split test: no error")
	}
}

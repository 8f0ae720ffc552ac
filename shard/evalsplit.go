package shard

import (
	"fmt"
	"math"

	"github.com/lrstream/lrstream/schema"
)

// EvalSplit splits the selected episodes into training and held-out
// evaluation episodes exactly as LeRobot 0.6.1's make_train_eval_datasets
// (DatasetConfig.eval_split): the episodes are grouped by their first task
// in the episodes index ("" for an episode without tasks), groups in the
// order their first episode appears, episodes in ascending index order;
// the last ceil(n × frac) episodes of each group are held out. frac must be
// in [0, 1); 0 holds out nothing. An empty training set is an error, as in
// LeRobot. (LeRobot walks DatasetConfig.episodes in the order given; a
// selection here is always ascending, which is the same split for
// ascending lists and for every episode.)
func EvalSplit(ds *schema.Dataset, sel Selection, frac float64) (train, eval []int64, err error) {
	if !(frac >= 0 && frac < 1) {
		return nil, nil, fmt.Errorf("--eval-split %v: must be in [0.0, 1.0) as LeRobot's eval_split", frac)
	}
	var order []string
	groups := map[string][]int64{}
	for _, e := range ds.Episodes {
		if !sel.Contains(e.Index) {
			continue
		}
		task := ""
		if len(e.Tasks) > 0 {
			task = e.Tasks[0]
		}
		if _, ok := groups[task]; !ok {
			order = append(order, task)
		}
		groups[task] = append(groups[task], e.Index)
	}
	for _, t := range order {
		eps := groups[t]
		nEval := int(math.Ceil(float64(len(eps)) * frac))
		train = append(train, eps[:len(eps)-nEval]...)
		eval = append(eval, eps[len(eps)-nEval:]...)
	}
	if len(train) == 0 {
		return nil, nil, fmt.Errorf("--eval-split %v leaves 0 training episodes from %d total", frac, len(train)+len(eval))
	}
	return train, eval, nil
}

// SplitSelection narrows sel to the training ("train") or held-out
// ("eval") episodes of EvalSplit.
func SplitSelection(ds *schema.Dataset, sel Selection, frac float64, part string) (Selection, error) {
	train, eval, err := EvalSplit(ds, sel, frac)
	if err != nil {
		return Selection{}, err
	}
	var eps []int64
	switch part {
	case "train":
		eps = train
	case "eval":
		eps = eval
		if len(eps) == 0 {
			return Selection{}, fmt.Errorf("--split eval: --eval-split %v holds out no episode", frac)
		}
	default:
		return Selection{}, fmt.Errorf("--split %q: want train or eval", part)
	}
	var r Ranges
	for _, e := range eps {
		r = append(r, Range{Lo: e, Hi: e})
	}
	return Selection{Episodes: r.normalize()}, nil
}

package collate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// PerSampleKeys are the keys lerobot_collate_fn keeps as per-sample lists
// instead of stacking.
var PerSampleKeys = []string{KeyMessages, KeyMessageStreams, KeyTargetMessages, KeyLanguagePersistent, KeyLanguageEvents}

// isPerSample reports whether key stays a per-sample list.
func isPerSample(key string) bool { return slices.Contains(PerSampleKeys, key) }

// CollateJSON collates JSON samples the way lerobot_collate_fn does, with
// the invariants the Batcher enforces. Each element of samples is nil (a
// None sample, dropped) or a map[string]any as encoding/json decodes an
// object (numbers as float64 or json.Number). The result is nil when every
// sample is None; otherwise a map from key to the collated value: a list of
// the samples' values for PerSampleKeys and strings, a stacked nested list
// for numbers, booleans and lists of them (dtype and shape must agree), and
// a recursively collated map for objects.
func CollateJSON(samples []any) (map[string]any, error) {
	var kept []map[string]any
	for i, s := range samples {
		switch v := s.(type) {
		case nil:
		case map[string]any:
			kept = append(kept, v)
		default:
			return nil, fmt.Errorf("collate: sample %d is a %T, want an object or null", i, s)
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	return collateMaps(kept, "")
}

// collateMaps collates a batch of objects key by key, in a deterministic
// order: per-sample keys first, then the others sorted.
func collateMaps(kept []map[string]any, prefix string) (map[string]any, error) {
	n := len(kept)
	count := map[string]int{}
	for _, m := range kept {
		for k := range m {
			count[k]++
		}
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		ia, ib := slices.Index(PerSampleKeys, a), slices.Index(PerSampleKeys, b)
		if ia < 0 {
			ia = len(PerSampleKeys)
		}
		if ib < 0 {
			ib = len(PerSampleKeys)
		}
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		name := prefix + k
		if e := checkPresence(name, count[k], n, func(i int) bool { _, ok := kept[i][k]; return ok }); e != nil {
			return nil, fmt.Errorf("collate: %w", e)
		}
		vals := make([]any, n)
		for i, m := range kept {
			vals[i] = m[k]
		}
		if prefix == "" && isPerSample(k) {
			out[k] = vals
			continue
		}
		v, err := stackJSON(name, vals)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// stackJSON stacks one key's values across the batch.
func stackJSON(key string, vals []any) (any, error) {
	switch vals[0].(type) {
	case string:
		for i, v := range vals {
			if _, ok := v.(string); !ok {
				return nil, &MismatchError{Key: key, What: "type", Position: i, Want: "str", Got: jsonKind(v)}
			}
		}
		return vals, nil
	case map[string]any:
		ms := make([]map[string]any, len(vals))
		for i, v := range vals {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, &MismatchError{Key: key, What: "type", Position: i, Want: "object", Got: jsonKind(v)}
			}
			ms[i] = m
		}
		return collateMaps(ms, key+".")
	}
	// Numbers promote across samples as torch does (bool < int < float);
	// shapes must agree exactly, as torch.stack requires.
	var sh0 []int
	for i, v := range vals {
		_, sh, err := arrayInfo(v)
		if err != nil {
			return nil, fmt.Errorf("collate: key '%s' at batch position %d: %w", key, i, err)
		}
		if i == 0 {
			sh0 = sh
			continue
		}
		if !slices.Equal(sh, sh0) {
			return nil, &MismatchError{Key: key, What: "shape", Position: i, Want: torchShape(sh0), Got: torchShape(sh)}
		}
	}
	return vals, nil
}

// arrayInfo returns the numpy dtype and shape of a JSON number, boolean or
// rectangular nested list of them: "|b1" for booleans, "<i8" when every
// number is an integer, "<f8" otherwise (as torch.tensor infers).
func arrayInfo(v any) (string, []int, error) {
	kinds := 0 // bit 1: bool, bit 2: int, bit 4: float
	leaf := -1 // depth of the scalars
	var walk func(v any, depth int, shape *[]int) error
	walk = func(v any, depth int, shape *[]int) error {
		if _, ok := v.([]any); !ok {
			if leaf >= 0 && leaf != depth {
				return fmt.Errorf("ragged nested list")
			}
			leaf = depth
		}
		switch x := v.(type) {
		case bool:
			kinds |= 1
		case float64:
			kinds |= 4
		case json.Number:
			if strings.ContainsAny(string(x), ".eE") {
				kinds |= 4
			} else {
				kinds |= 2
			}
		case int, int64:
			kinds |= 2
		case []any:
			if leaf >= 0 && depth >= leaf {
				return fmt.Errorf("ragged nested list")
			}
			if depth == len(*shape) {
				*shape = append(*shape, len(x))
			} else if depth > len(*shape) || (*shape)[depth] != len(x) {
				return fmt.Errorf("ragged nested list")
			}
			for _, e := range x {
				if err := walk(e, depth+1, shape); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("cannot stack a %s", jsonKind(v))
		}
		return nil
	}
	var shape []int
	if err := walk(v, 0, &shape); err != nil {
		return "", nil, err
	}
	switch {
	case kinds&4 != 0:
		return "<f8", shape, nil
	case kinds&2 != 0:
		return "<i8", shape, nil
	case kinds&1 != 0:
		return "|b1", shape, nil
	}
	return "<f4", shape, nil // empty list: torch's default dtype
}

// torchShape formats a shape the way torch prints sizes: [2, 3].
func torchShape(sh []int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, d := range sh {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprint(&sb, d)
	}
	sb.WriteByte(']')
	return sb.String()
}

// jsonKind names a JSON value's type for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case string:
		return "str"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "number"
}

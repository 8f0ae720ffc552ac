package shard

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Range is an inclusive range of episode indices [Lo, Hi].
type Range struct{ Lo, Hi int64 }

// Ranges is a sorted list of disjoint, non-adjacent ranges, as returned by
// ParseRanges.
type Ranges []Range

// ParseRanges parses a comma-separated list of episode indices and
// inclusive ranges, such as "0-9,12". Spaces around items are allowed;
// the empty string is the empty list. Overlapping items are merged.
func ParseRanges(s string) (Ranges, error) {
	var out Ranges
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("episode ranges %q: empty item", s)
		}
		lo, hi, isRange := strings.Cut(item, "-")
		a, err := parseEpisode(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("episode ranges %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseEpisode(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("episode ranges %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("episode ranges %q: range %q ends before it starts", s, item)
			}
		}
		out = append(out, Range{a, b})
	}
	return out.normalize(), nil
}

func parseEpisode(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("missing episode index")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("invalid episode index %q", s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid episode index %q: out of range", s)
	}
	return v, nil
}

func (r Ranges) normalize() Ranges {
	sort.Slice(r, func(i, j int) bool { return r[i].Lo < r[j].Lo })
	out := r[:0]
	for _, x := range r {
		if k := len(out) - 1; k >= 0 && (out[k].Hi == math.MaxInt64 || x.Lo <= out[k].Hi+1) {
			if x.Hi > out[k].Hi {
				out[k].Hi = x.Hi
			}
			continue
		}
		out = append(out, x)
	}
	return out
}

// Contains reports whether v is in one of the ranges.
func (r Ranges) Contains(v int64) bool {
	k := sort.Search(len(r), func(i int) bool { return r[i].Hi >= v })
	return k < len(r) && r[k].Lo <= v
}

// String formats the ranges in the syntax ParseRanges accepts.
func (r Ranges) String() string {
	var b strings.Builder
	for i, x := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(x.Lo, 10))
		if x.Hi != x.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(x.Hi, 10))
		}
	}
	return b.String()
}

// Selection chooses episodes: those in Episodes (every episode when
// Episodes is empty) that are not in Exclude.
type Selection struct {
	Episodes Ranges
	Exclude  Ranges
}

// ParseSelection parses the --episodes and --exclude-episodes flag values.
func ParseSelection(episodes, exclude string) (Selection, error) {
	inc, err := ParseRanges(episodes)
	if err != nil {
		return Selection{}, fmt.Errorf("--episodes: %w", err)
	}
	exc, err := ParseRanges(exclude)
	if err != nil {
		return Selection{}, fmt.Errorf("--exclude-episodes: %w", err)
	}
	return Selection{Episodes: inc, Exclude: exc}, nil
}

// All reports whether the selection keeps every episode.
func (s Selection) All() bool { return len(s.Episodes) == 0 && len(s.Exclude) == 0 }

// Contains reports whether episode ep is selected.
func (s Selection) Contains(ep int64) bool {
	if len(s.Episodes) > 0 && !s.Episodes.Contains(ep) {
		return false
	}
	return !s.Exclude.Contains(ep)
}

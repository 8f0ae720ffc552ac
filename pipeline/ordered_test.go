package pipeline

import (
	"context"
	"errors"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"
)

func TestOrderedKeepsInputOrder(t *testing.T) {
	for _, tc := range []struct{ n, workers, window int }{
		{0, 2, 4}, {1, 1, 1}, {100, 1, 1}, {100, 4, 4}, {1000, 8, 3}, {257, 3, 16},
	} {
		var inflight, maxInflight atomic.Int64
		var got []int
		err := ordered(context.Background(), tc.n, tc.workers, tc.window,
			func(_ context.Context, i int) (int, error) {
				v := inflight.Add(1)
				for {
					m := maxInflight.Load()
					if v <= m || maxInflight.CompareAndSwap(m, v) {
						break
					}
				}
				time.Sleep(time.Duration(rand.Intn(50)) * time.Microsecond)
				return i * i, nil
			},
			func(i, v int) error {
				inflight.Add(-1)
				if v != i*i {
					t.Fatalf("input %d got %d", i, v)
				}
				got = append(got, i)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.n {
			t.Fatalf("%+v: emitted %d of %d", tc, len(got), tc.n)
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("%+v: position %d emitted input %d", tc, i, v)
			}
		}
		w := max(tc.window, tc.workers)
		if m := maxInflight.Load(); m > int64(w) {
			t.Fatalf("%+v: %d in flight, window %d", tc, m, w)
		}
	}
}

func TestOrderedStopsAtFirstError(t *testing.T) {
	boom := errors.New("boom")
	var emitted int
	err := ordered(context.Background(), 1000, 4, 8,
		func(_ context.Context, i int) (int, error) {
			if i == 10 {
				return 0, boom
			}
			return i, nil
		},
		func(i, v int) error { emitted++; return nil })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if emitted != 10 {
		t.Fatalf("emitted %d results before the failing input, want 10", emitted)
	}
	err = ordered(context.Background(), 50, 2, 2,
		func(_ context.Context, i int) (int, error) { return i, nil },
		func(i, v int) error {
			if i == 5 {
				return boom
			}
			return nil
		})
	if !errors.Is(err, boom) {
		t.Fatalf("emit error: %v", err)
	}
}

func TestOrderedCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	err := ordered(ctx, 1000, 2, 4,
		func(ctx context.Context, i int) (int, error) { return i, nil },
		func(i, v int) error {
			if i == 3 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

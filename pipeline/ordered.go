package pipeline

import (
	"context"
	"sync"
)

// ordered runs fn over the inputs 0..n-1 on up to workers goroutines and
// hands the results to emit strictly in input order, on the calling
// goroutine. At most window results are in flight (computed or being
// computed but not yet emitted), which bounds memory whatever the relative
// speed of fn and emit. The first error, from fn or emit, stops the work and
// is returned; ctx cancellation is reported as ctx.Err().
func ordered[T any](ctx context.Context, n, workers, window int, fn func(ctx context.Context, i int) (T, error), emit func(i int, v T) error) error {
	if n == 0 {
		return ctx.Err()
	}
	if workers < 1 {
		workers = 1
	}
	if window < workers {
		window = workers
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type result struct {
		v   T
		err error
	}
	// slots[i%window] carries input i's result; each slot is a channel of
	// capacity 1 so workers never block on delivery.
	slots := make([]chan result, window)
	for i := range slots {
		slots[i] = make(chan result, 1)
	}
	// tickets limit in-flight inputs to window.
	tickets := make(chan struct{}, window)
	next := make(chan int)
	var wg sync.WaitGroup
	go func() {
		defer close(next)
		for i := 0; i < n; i++ {
			select {
			case tickets <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				v, err := fn(ctx, i)
				slots[i%window] <- result{v, err}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for i := 0; i < n; i++ {
		var r result
		select {
		case r = <-slots[i%window]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := emit(i, r.v); err != nil {
			return err
		}
		<-tickets
	}
	return nil
}

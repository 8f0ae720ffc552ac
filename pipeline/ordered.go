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

// orderedFeed is ordered over inputs produced lazily: next returns the
// next input, false when there are no more, or an error (returned in input
// order, after the results of the inputs before it). next runs on its own
// goroutine, ahead of the workers by at most window inputs.
func orderedFeed[I, T any](ctx context.Context, workers, window int, next func(ctx context.Context) (I, bool, error), fn func(ctx context.Context, in I) (T, error), emit func(in I, v T) error) error {
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
	type job struct {
		in  I
		out chan result // capacity 1: workers never block on delivery
	}
	// pending carries the jobs in input order to the emitting loop; its
	// capacity is the window, so at most window inputs are in flight.
	pending := make(chan job, window)
	work := make(chan job, window)
	go func() {
		defer close(pending)
		defer close(work)
		for {
			in, ok, err := next(ctx)
			if !ok && err == nil {
				return
			}
			j := job{in: in, out: make(chan result, 1)}
			if err != nil {
				j.out <- result{err: err}
			}
			select {
			case pending <- j:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			select {
			case work <- j:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				v, err := fn(ctx, j.in)
				j.out <- result{v, err}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for j := range pending {
		var r result
		select {
		case r = <-j.out:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := emit(j.in, r.v); err != nil {
			return err
		}
	}
	return ctx.Err()
}

package fetch

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress draws one status line for all downloads in flight:
//
//	hub: 2 files  12.3 MiB / 48.0 MiB  4.1 MiB/s  ETA 9s
//
// redrawn at most every 200ms with a carriage return, and ended with a
// newline when the last download finishes. It is only created when
// HubOptions.Progress is set (the CLI sets it when stderr is a terminal).
type progress struct {
	w   io.Writer
	now func() time.Time

	mu       sync.Mutex
	active   int
	total    int64 // bytes expected by the active downloads
	done     int64 // bytes received by the active downloads
	started  time.Time
	lastDraw time.Time
	drawn    bool
}

func newProgress(w io.Writer) *progress { return &progress{w: w, now: time.Now} }

// tracker is one download's share of the progress line.
type tracker struct {
	p          *progress
	name       string
	size, have int64
}

func (p *progress) start(name string, size int64) *tracker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active == 0 {
		p.total, p.done = 0, 0
		p.started = p.now()
	}
	p.active++
	p.total += size
	return &tracker{p: p, name: name, size: size}
}

func (t *tracker) add(n int64) {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	t.have += n
	p.done += n
	p.drawLocked(false)
}

// grow adds n bytes to the expected total (a refused resume).
func (t *tracker) grow(n int64) {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += n
	t.size += n
}

func (t *tracker) done() {
	p := t.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active--
	if p.active == 0 {
		p.drawLocked(true)
		if p.drawn {
			fmt.Fprint(p.w, "\n")
		}
		p.drawn = false
	}
}

func (p *progress) drawLocked(force bool) {
	now := p.now()
	if !force && now.Sub(p.lastDraw) < 200*time.Millisecond {
		return
	}
	p.lastDraw = now
	p.drawn = true
	el := now.Sub(p.started).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(p.done) / el
	}
	eta := "--"
	if rate > 0 && p.total >= p.done {
		eta = time.Duration(float64(p.total-p.done) / rate * float64(time.Second)).Round(time.Second).String()
		if p.total == p.done {
			eta = "0s"
		}
	}
	files := "file"
	if p.active != 1 {
		files = "files"
	}
	fmt.Fprintf(p.w, "\rhub: %d %s  %s / %s  %s/s  ETA %s\x1b[K", max(p.active, 1), files, humanBytes(p.done), humanBytes(p.total), humanBytes(int64(rate)), eta)
}

// humanBytes formats n with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return fmt.Sprintf("%.1f PiB", f/unit)
}

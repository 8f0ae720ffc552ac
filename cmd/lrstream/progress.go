package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a one-line progress display on a terminal: frames done,
// rate, and ETA when the total is known. It is a no-op when w is nil. A
// progress made by summaryOnly draws nothing while running and writes one
// summary line at the end (stderr that is not a terminal: Slurm logs).
type progress struct {
	w     io.Writer
	live  bool
	label string
	total atomic.Int64
	done  atomic.Int64
	bytes func() int64
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
	began bool   // a live display's ticker runs (begin)
	note  string // ends the final line (finishWith)
}

// startProgress starts a display on w (nil: none) for total frames (0 if
// unknown); bytes, when set, reports output bytes for a MB/s figure.
func startProgress(w io.Writer, label string, total int64, bytes func() int64) *progress {
	p := newProgress(w, label, total, bytes)
	p.begin()
	return p
}

// newProgress is startProgress for a display that begins later (begin),
// once the run's inputs are checked: it counts frames from now on but
// draws nothing before begin, and finish draws nothing without it.
func newProgress(w io.Writer, label string, total int64, bytes func() int64) *progress {
	p := &progress{w: w, live: true, label: label, bytes: bytes, start: time.Now(), stop: make(chan struct{})}
	p.total.Store(total)
	return p
}

// begin starts drawing a display made by newProgress (once).
func (p *progress) begin() {
	if p.w == nil || p.began {
		return
	}
	p.began = true
	p.start = time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw(false)
			case <-p.stop:
				return
			}
		}
	}()
}

// summaryOnly returns a progress that writes only the final line to w.
func summaryOnly(w io.Writer, label string, total int64, bytes func() int64) *progress {
	p := &progress{w: w, label: label, bytes: bytes, start: time.Now()}
	p.total.Store(total)
	return p
}

// setTotal replaces the total (0: unknown), once the pipeline knows it.
func (p *progress) setTotal(n int64) { p.total.Store(n) }

// add counts n more frames.
func (p *progress) add(n int) { p.done.Add(int64(n)) }

// finish stops the display and leaves the final line.
func (p *progress) finish() { p.finishWith("") }

// finishWith is finish with a note ending the final line: why the run
// stopped short of its total (the reader closed the pipe), so that a
// line ending at 47.7 % is not mistaken for a hang.
func (p *progress) finishWith(note string) {
	if p.w == nil {
		return
	}
	if p.live {
		if !p.began {
			return // the run failed before it began: its error alone
		}
		close(p.stop)
		p.wg.Wait()
	}
	p.note = note
	p.draw(true)
}

func (p *progress) draw(final bool) {
	done, total := p.done.Load(), p.total.Load()
	el := time.Since(p.start).Seconds()
	rate := 0.0
	if el > 0 {
		rate = float64(done) / el
	}
	line := fmt.Sprintf("%s: %d", p.label, done)
	if total > 0 {
		line += fmt.Sprintf("/%d frames (%.1f%%)", total, 100*float64(done)/float64(total))
	} else {
		line += " frames"
	}
	line += fmt.Sprintf("  %.0f frames/s", rate)
	if p.bytes != nil && el > 0 {
		line += fmt.Sprintf("  %.1f MB/s", float64(p.bytes())/el/1e6)
	}
	if total > 0 && rate > 0 && done < total && !final {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
		line += fmt.Sprintf("  ETA %s", eta)
	}
	if final && p.note != "" {
		line += "  " + p.note
	}
	switch {
	case !p.live:
		line += fmt.Sprintf("  in %s", time.Since(p.start).Round(time.Millisecond))
		fmt.Fprintln(p.w, line)
	case final:
		// Clear whatever another process wrote after our line, then end
		// ours with a newline so the next output starts on a fresh line.
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", line)
	default:
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
	}
}

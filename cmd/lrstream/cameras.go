package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/lrstream/lrstream/pipeline"
)

// stderrLog is the logger of a command's notes on stderr.
func stderrLog(w io.Writer) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// logCameraNotes warns, once per dataset, about the cameras a run leaves
// out without having been asked to (--cameras auto on a copy without
// video files): a piped stream would otherwise drop them silently. -q
// does not hide it (a camera missing from training is not a progress
// note); commands skip it only when a terminal preview shows the
// cameras' status itself.
func logCameraNotes(log *slog.Logger, mix []pipeline.Mix) {
	for _, m := range mix {
		if note := pipeline.CameraNote(m.Config); note != "" {
			log.Warn(note)
		}
	}
}

// onceHandler logs each distinct record (message and attributes) once:
// serve's clients each start a training iteration that states the same
// shuffle-buffer warning, which the log needs once, not per client.
type onceHandler struct {
	slog.Handler
	mu   *sync.Mutex
	seen map[string]bool
}

func newOnceHandler(h slog.Handler) *onceHandler {
	return &onceHandler{Handler: h, mu: &sync.Mutex{}, seen: map[string]bool{}}
}

func (h *onceHandler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString("\x00" + a.String())
		return true
	})
	key := b.String()
	h.mu.Lock()
	dup := h.seen[key]
	if !dup && len(h.seen) < 1024 {
		h.seen[key] = true
	}
	h.mu.Unlock()
	if dup {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *onceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &onceHandler{Handler: h.Handler.WithAttrs(as), mu: h.mu, seen: h.seen}
}

func (h *onceHandler) WithGroup(name string) slog.Handler {
	return &onceHandler{Handler: h.Handler.WithGroup(name), mu: h.mu, seen: h.seen}
}

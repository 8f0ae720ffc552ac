package main

import (
	"io"
	"log/slog"

	"github.com/lrstream/lrstream/pipeline"
)

// stderrLog is the logger of a command's notes on stderr.
func stderrLog(w io.Writer) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// logCameraNotes logs, once per dataset, the cameras a run leaves out
// without having been asked to (--cameras auto on a copy without video
// files): a piped stream would otherwise drop them silently. Commands
// skip it when a terminal preview shows the cameras' status itself.
func logCameraNotes(log *slog.Logger, mix []pipeline.Mix) {
	for _, m := range mix {
		if note := pipeline.CameraNote(m.Config); note != "" {
			log.Info(note)
		}
	}
}

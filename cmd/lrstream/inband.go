package main

import (
	"errors"

	"github.com/lrstream/lrstream/sink"
)

// failInBand writes err to stdout as a lone in-band error message (a
// complete stream, docs/wire-format.md: `stream = error`), so that a
// consumer reading stdout sees why there is no stream instead of an empty
// one. Nothing is written to a terminal (the error goes to stderr as
// usual) or in an unknown format.
func failInBand(e *env, format string, err error) {
	if isTerminal(e.stdout) {
		return
	}
	var s sink.Sink
	switch format {
	case "msgpack":
		s = sink.NewMsgpack(e.stdout)
	case "jsonl":
		s = sink.NewJSONL(e.stdout)
	default:
		return
	}
	// The same text as on stderr (tidyError drops repeated context).
	_ = s.Fail(errors.New(tidyError("", err)))
	if f, ok := e.stdout.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
}

package main

import (
	"errors"
	"strings"

	"github.com/lrstream/lrstream/sink"
)

// loneError reports whether out is a stream of a single in-band error
// message (what a consumer sees when a command fails before the header),
// and its text.
func loneError(out string) (string, bool) {
	st, err := sink.Decode(strings.NewReader(out))
	var se *sink.StreamError
	if !errors.As(err, &se) || st.Header != nil || len(st.Batches) > 0 {
		return "", false
	}
	return se.Message, true
}

package shard

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// Error is a read error with its location. Fields that do not apply are
// empty (File, Column) or -1 (RowGroup, Episode, Index).
type Error struct {
	// Dataset is the source's ID.
	Dataset string
	// File is the dataset-relative path of the file.
	File     string
	RowGroup int
	Episode  int64
	Index    int64
	Column   string
	Err      error
}

// Error formats the location then the cause.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Dataset != "" {
		b.WriteString("dataset ")
		b.WriteString(e.Dataset)
		b.WriteString(": ")
	}
	if e.File != "" {
		b.WriteString(e.File)
	}
	if e.RowGroup >= 0 {
		b.WriteString(" row group ")
		b.WriteString(strconv.Itoa(e.RowGroup))
	}
	if e.Episode >= 0 {
		b.WriteString(" episode ")
		b.WriteString(strconv.FormatInt(e.Episode, 10))
	}
	if e.Index >= 0 {
		b.WriteString(" index ")
		b.WriteString(strconv.FormatInt(e.Index, 10))
	}
	if e.Column != "" {
		b.WriteString(" column ")
		b.WriteString(e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func fileErr(dataset, file string, err error) *Error {
	return &Error{Dataset: dataset, File: file, RowGroup: -1, Episode: -1, Index: -1, Err: err}
}

// panicError converts a recovered panic (a parquet decoder panicking on
// corrupt input) into an error.
type panicError struct {
	val   any
	stack string
}

func (p *panicError) Error() string {
	return fmt.Sprintf("corrupt or unsupported parquet data (decoder panic: %v)", p.val)
}

// recoverTo turns a panic into *err; use as `defer recoverTo(&err, ...)`.
func recoverTo(err *error, wrap func(error) error) {
	if r := recover(); r != nil {
		pe := &panicError{val: r, stack: string(debug.Stack())}
		*err = wrap(pe)
	}
}

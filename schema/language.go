package schema

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Column names a LeRobot language column.
type Column string

const (
	// PersistentColumn is the language_persistent column: rows broadcast to
	// every frame of an episode, each with its own timestamp.
	PersistentColumn Column = "language_persistent"
	// EventsColumn is the language_events column: rows stored only on the
	// frame where they were emitted, without a timestamp of their own.
	EventsColumn Column = "language_events"
)

// The core language styles of LeRobot's style registry.
const (
	StyleSubtask      = "subtask"
	StylePlan         = "plan"
	StyleMemory       = "memory"
	StyleMotion       = "motion"
	StyleTaskAug      = "task_aug"
	StyleInterjection = "interjection"
	StyleVQA          = "vqa"
	StyleTrace        = "trace"
)

// StyleInfo describes one registered language style.
type StyleInfo struct {
	// Name is the style string stored in a row's style field.
	Name string
	// Column is where rows of the style live.
	Column Column
	// ViewDependent styles describe a specific camera view: their rows must
	// carry a camera; rows of every other style must not.
	ViewDependent bool
}

// coreStyles is LeRobot's registry, persistent styles first.
var coreStyles = [...]StyleInfo{
	{StyleSubtask, PersistentColumn, false},
	{StylePlan, PersistentColumn, false},
	{StyleMemory, PersistentColumn, false},
	{StyleMotion, PersistentColumn, false},
	{StyleTaskAug, PersistentColumn, false},
	{StyleInterjection, EventsColumn, false},
	{StyleVQA, EventsColumn, true},
	{StyleTrace, EventsColumn, true},
}

// CoreStyles returns the registered styles: subtask, plan, memory, motion
// and task_aug (persistent), interjection, vqa and trace (events; vqa and
// trace view-dependent). The slice is a fresh copy.
func CoreStyles() []StyleInfo {
	out := make([]StyleInfo, len(coreStyles))
	copy(out, coreStyles[:])
	return out
}

// LookupStyle returns the registry entry for style.
func LookupStyle(style string) (StyleInfo, bool) {
	for _, s := range coreStyles {
		if s.Name == style {
			return s, true
		}
	}
	return StyleInfo{}, false
}

// IsPersistentStyle reports whether style is registered as persistent.
func IsPersistentStyle(style string) bool {
	s, ok := LookupStyle(style)
	return ok && s.Column == PersistentColumn
}

// IsViewDependentStyle reports whether rows of style must name a camera.
func IsViewDependentStyle(style string) bool {
	s, ok := LookupStyle(style)
	return ok && s.ViewDependent
}

// ErrUnknownStyle is wrapped by errors for styles missing from the registry.
var ErrUnknownStyle = errors.New("unknown language style")

// UnknownStyleError reports a style missing from the registry. Its message
// is LeRobot's: "Unknown language style: 'foo'".
type UnknownStyleError struct{ Style string }

// Error returns LeRobot's message for the unknown style.
func (e *UnknownStyleError) Error() string {
	return "Unknown language style: " + PyQuote(e.Style)
}

// Unwrap makes errors.Is(err, ErrUnknownStyle) true.
func (e *UnknownStyleError) Unwrap() error { return ErrUnknownStyle }

// ColumnForStyle routes a style to the column its rows live in, like
// LeRobot's column_for_style: a nil style (no style) routes to the events
// column, registered styles to their column, anything else is an
// *UnknownStyleError.
func ColumnForStyle(style *string) (Column, error) {
	if style == nil {
		return EventsColumn, nil
	}
	s, ok := LookupStyle(*style)
	if !ok {
		return "", &UnknownStyleError{Style: *style}
	}
	return s.Column, nil
}

// ValidateCamera enforces the camera invariant: rows of a view-dependent
// style (vqa, trace) need a non-empty camera, rows of any other style
// (including a nil style) must have a nil camera.
func ValidateCamera(style, camera *string) error {
	name := "None"
	if style != nil {
		name = PyQuote(*style)
	}
	if style != nil && IsViewDependentStyle(*style) {
		if camera == nil || *camera == "" {
			return fmt.Errorf("Rows of view-dependent style %s require a non-empty 'camera' field referencing an 'observation.images.*' feature key.", name)
		}
		return nil
	}
	if camera != nil {
		return fmt.Errorf("Rows of style %s must have camera=None; got camera=%s.", name, PyQuote(*camera))
	}
	return nil
}

// ValidateRow checks one row against the registry and the camera
// invariant; persistent says which column the row was read from.
func ValidateRow(r *Row, persistent bool) error {
	col, err := ColumnForStyle(r.Style)
	if err != nil {
		return err
	}
	if persistent && col != PersistentColumn {
		return fmt.Errorf("style %s is event-only but the row is in %s", PyQuote(deref(r.Style)), PersistentColumn)
	}
	if !persistent && col != EventsColumn {
		return fmt.Errorf("style %s is persistent but the row is in %s", PyQuote(deref(r.Style)), EventsColumn)
	}
	return ValidateCamera(r.Style, r.Camera)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// PyQuote formats s the way Python's repr() formats a str, so error
// messages match LeRobot's byte for byte: single quotes unless the string
// contains a single quote and no double quote, backslash escapes for
// quotes, backslashes and \t \n \r, \xNN / \uNNNN / \UNNNNNNNN for
// non-printable characters, printable non-ASCII kept as is.
func PyQuote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(q)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			// Not valid UTF-8: Python strings cannot hold this; show the byte.
			b.WriteString(`\x`)
			b.WriteString(hex2(uint32(s[i])))
			i++
			continue
		}
		i += size
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(uint32(r)))
		case r < 0x7f:
			b.WriteRune(r)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			b.WriteString(`\x`)
			b.WriteString(hex2(uint32(r)))
		case r < 0x10000:
			b.WriteString(`\u`)
			b.WriteString(pad(strconv.FormatUint(uint64(r), 16), 4))
		default:
			b.WriteString(`\U`)
			b.WriteString(pad(strconv.FormatUint(uint64(r), 16), 8))
		}
	}
	b.WriteByte(q)
	return b.String()
}

func hex2(v uint32) string { return pad(strconv.FormatUint(uint64(v), 16), 2) }

func pad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

func decodeRune(s string) (rune, int) { return utf8.DecodeRuneInString(s) }

package render

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lrstream/lrstream/schema"
)

// resolverKind is one of LeRobot's four resolver functions.
type resolverKind uint8

const (
	kindActiveAt resolverKind = iota + 1
	kindEmittedAt
	kindNthPrev
	kindNthNext
)

func (k resolverKind) String() string {
	switch k {
	case kindActiveAt:
		return "active_at"
	case kindEmittedAt:
		return "emitted_at"
	case kindNthPrev:
		return "nth_prev"
	case kindNthNext:
		return "nth_next"
	}
	return "?"
}

// selector is the row filter of a resolver; nil fields match anything.
type selector struct {
	style, role, toolName, camera *string
}

func (s selector) key() string {
	var b strings.Builder
	for _, p := range []*string{s.style, s.role, s.toolName, s.camera} {
		if p == nil {
			b.WriteString("\x00N")
		} else {
			b.WriteString("\x00S")
			b.WriteString(*p)
		}
	}
	return b.String()
}

// resolver is a compiled binding expression such as
// "nth_prev(style=memory, offset=1)".
//
// LeRobot parses and checks a resolver expression only when a frame
// resolves the binding, and every such check is independent of the data.
// We run the checks once at load time and keep the outcome in err, which
// Render reports whenever a frame resolves the binding, exactly when
// upstream would raise.
type resolver struct {
	spec string
	kind resolverKind
	sel  selector
	// offset is signed: nth_prev(offset=n) walks -n.
	offset int
	// events: emitted_at over the frame's event rows (a nil or event-only
	// style); otherwise the resolver reads the episode's persistent rows.
	events bool
	// tl is the index of the persistent timeline this resolver reads.
	tl  int
	err error
}

// maxOffset bounds parsed offsets; any larger magnitude resolves exactly
// like this one (out of range, None), since no episode has that many rows.
const maxOffset = 1 << 40

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

func isIdentStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// kwarg is one parsed key=value resolver argument.
type kwarg struct {
	key    string
	value  string
	offset int
}

// parseResolver compiles a resolver expression with LeRobot's grammar:
// NAME(ARGS) where NAME is an ASCII identifier and ARGS (no newline) is a
// comma-separated list of `t` and `key=value` items; values lose
// surrounding quotes; offset values are Python integers. Errors carry
// upstream's messages.
func parseResolver(spec string) *resolver {
	r := &resolver{spec: spec}
	r.err = r.parse()
	return r
}

func (r *resolver) parse() error {
	name, argText, err := splitCall(r.spec)
	if err != nil {
		return err
	}
	args, err := parseArgs(argText)
	if err != nil {
		return err
	}
	if err := r.setKind(name); err != nil {
		return err
	}
	// Bind keyword arguments like the Python call would.
	if err := r.checkKeywords(name, args); err != nil {
		return err
	}
	offset := 1
	for _, a := range args {
		v := a.value
		switch a.key {
		case "style":
			r.sel.style = &v
		case "role":
			r.sel.role = &v
		case "tool_name":
			r.sel.toolName = &v
		case "camera":
			r.sel.camera = &v
		case "offset":
			offset = a.offset
		}
	}
	return r.checkStyle(name, offset)
}

// splitCall splits a resolver expression NAME(ARGS) into its name and
// argument text.
func splitCall(spec string) (name, args string, err error) {
	s := pyStrip(spec)
	i := 0
	if i < len(s) && isIdentStart(s[i]) {
		i++
		for i < len(s) && isIdentChar(s[i]) {
			i++
		}
	}
	if i == 0 || i >= len(s) || s[i] != '(' || s[len(s)-1] != ')' || len(s) < i+2 ||
		strings.IndexByte(s[i+1:len(s)-1], '\n') >= 0 {
		return "", "", fmt.Errorf("Invalid resolver expression: %s", schema.PyQuote(spec))
	}
	return s[:i], s[i+1 : len(s)-1], nil
}

// setKind sets the resolver's kind from its name.
func (r *resolver) setKind(name string) error {
	switch name {
	case "emitted_at":
		r.kind = kindEmittedAt
	case "active_at":
		r.kind = kindActiveAt
	case "nth_prev":
		r.kind = kindNthPrev
	case "nth_next":
		r.kind = kindNthNext
	default:
		return fmt.Errorf("Unknown language resolver: %s", schema.PyQuote(name))
	}
	return nil
}

// checkKeywords refuses the keyword arguments the Python resolver name
// does not take, with Python's message.
func (r *resolver) checkKeywords(name string, args []kwarg) error {
	nth := r.kind == kindNthPrev || r.kind == kindNthNext
	qual := "lerobot.datasets.language_render." + name
	for _, a := range args {
		switch a.key {
		case "style", "role", "tool_name", "camera":
		case "offset":
			if !nth {
				return fmt.Errorf("%s() got an unexpected keyword argument 'offset'", name)
			}
		case "persistent":
			return fmt.Errorf("%s() got multiple values for keyword argument 'persistent'", qual)
		case "events":
			if r.kind == kindEmittedAt {
				return fmt.Errorf("%s() got multiple values for keyword argument 'events'", qual)
			}
			return fmt.Errorf("%s() got an unexpected keyword argument 'events'", name)
		case "t":
			return fmt.Errorf("%s() got multiple values for argument 't'", name)
		default:
			return fmt.Errorf("%s() got an unexpected keyword argument %s", name, schema.PyQuote(a.key))
		}
	}
	return nil
}

// checkStyle sets which column the resolver reads from its style, and
// the signed offset of nth_prev / nth_next.
func (r *resolver) checkStyle(name string, offset int) error {
	nth := r.kind == kindNthPrev || r.kind == kindNthNext
	switch r.kind {
	case kindEmittedAt:
		col, err := schema.ColumnForStyle(r.sel.style)
		if err != nil {
			return err
		}
		r.events = col == schema.EventsColumn
	default:
		if r.sel.style == nil {
			return fmt.Errorf("%s requires a persistent style.", name)
		}
		col, err := schema.ColumnForStyle(r.sel.style)
		if err != nil {
			return err
		}
		if col != schema.PersistentColumn {
			return fmt.Errorf("%s cannot be used with event-only style %s.", name, schema.PyQuote(*r.sel.style))
		}
		if nth {
			if offset == 0 {
				return fmt.Errorf("%s offset must be non-zero.", name)
			}
			if r.kind == kindNthPrev {
				offset = -offset
			}
			r.offset = offset
		}
	}
	return nil
}

// parseArgs splits a resolver's argument list. Later duplicates of a key
// win, as in the Python kwargs dict.
func parseArgs(args string) ([]kwarg, error) {
	var out []kwarg
	if pyStrip(args) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(args, ",") {
		part = pyStrip(part)
		if part == "" || part == "t" {
			continue
		}
		eq := strings.IndexByte(part, '=')
		if eq < 0 {
			return nil, fmt.Errorf("Invalid resolver argument: %s", schema.PyQuote(part))
		}
		key, value := pyStrip(part[:eq]), pyStrip(part[eq+1:])
		if key == "t_arg" {
			// upstream pops "t_arg" (its marker for a bare t) after parsing
			continue
		}
		a := kwarg{key: key}
		if key == "offset" {
			n, err := pyInt(value)
			if err != nil {
				return nil, err
			}
			a.offset = n
		} else {
			a.value = strings.Trim(value, `"'`)
		}
		replaced := false
		for i := range out {
			if out[i].key == key {
				out[i] = a
				replaced = true
			}
		}
		if !replaced {
			out = append(out, a)
		}
	}
	return out, nil
}

// pyInt parses s like Python's int(s): surrounding whitespace, an optional
// sign, Unicode decimal digits with single underscores between them. The
// magnitude saturates at maxOffset.
func pyInt(s string) (int, error) {
	bad := fmt.Errorf("invalid literal for int() with base 10: %s", schema.PyQuote(s))
	t := pyStrip(s)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" {
		return 0, bad
	}
	n := 0
	prevDigit := false
	for i := 0; i < len(t); {
		r, size := utf8.DecodeRuneInString(t[i:])
		i += size
		if r == '_' {
			if !prevDigit {
				return 0, bad
			}
			prevDigit = false
			continue
		}
		d := digitValue(r)
		if d < 0 {
			return 0, bad
		}
		prevDigit = true
		if n < maxOffset {
			n = n*10 + d
		}
	}
	if !prevDigit {
		return 0, bad
	}
	if n > maxOffset {
		n = maxOffset
	}
	if neg {
		n = -n
	}
	return n, nil
}

// digitValue is the decimal value of a Unicode Nd character, or -1.
func digitValue(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	if r < 0x80 || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	// Nd characters come in contiguous runs of whole decades, each
	// starting at a zero.
	z := r
	for z > 0 && unicode.Is(unicode.Nd, z-1) {
		z--
	}
	return int(r-z) % 10
}

var errNotString = errors.New("binding spec is not a string")

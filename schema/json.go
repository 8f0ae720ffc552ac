package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// MarshalJSON writes the message as LeRobot renders it: "role", then
// "content" only for TextContent / BlockContent, then "tool_calls" only
// when ToolCalls is non-nil.
func (m Message) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(nil)
}

// AppendJSON appends the message's JSON encoding (see MarshalJSON) to b.
func (m Message) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"role":`...)
	b = AppendJSONString(b, m.Role)
	var err error
	switch m.Kind {
	case TextContent:
		b = append(b, `,"content":`...)
		b = AppendJSONString(b, m.Text)
	case BlockContent:
		b = append(b, `,"content":[`...)
		for i, blk := range m.Blocks {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = blk.AppendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if m.ToolCalls != nil {
		if !json.Valid(m.ToolCalls) {
			return nil, fmt.Errorf("schema: message tool_calls is not valid JSON")
		}
		b = append(b, `,"tool_calls":`...)
		b = append(b, m.ToolCalls...)
	}
	return append(b, '}'), nil
}

// MarshalJSON writes {"messages", "message_streams",
// "target_message_indices"}, LeRobot's rendered-sample dict. Nil slices are
// written as empty lists.
func (s Sample) MarshalJSON() ([]byte, error) {
	return s.AppendJSON(nil)
}

// AppendJSON appends the sample's JSON encoding (see MarshalJSON) to b.
func (s Sample) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"messages":[`...)
	var err error
	for i := range s.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = s.Messages[i].AppendJSON(b); err != nil {
			return nil, err
		}
	}
	b = append(b, `],"message_streams":[`...)
	for i, st := range s.Streams {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, st)
	}
	b = append(b, `],"target_message_indices":[`...)
	for i, t := range s.Targets {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(t), 10)
	}
	return append(b, "]}"...), nil
}

// MarshalJSON writes the map as a JSON object in insertion order.
func (m Map) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(nil)
}

// AppendJSON appends the map's JSON encoding to b. Values may be nil,
// bool, int, int64, float64 (finite), string, json.Number,
// json.RawMessage, []any, Map or *Map.
func (m Map) AppendJSON(b []byte) ([]byte, error) {
	if len(m.Keys) != len(m.Values) {
		return nil, fmt.Errorf("schema: Map has %d keys but %d values", len(m.Keys), len(m.Values))
	}
	b = append(b, '{')
	var err error
	for i, k := range m.Keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, k)
		b = append(b, ':')
		if b, err = appendValue(b, m.Values[i]); err != nil {
			return nil, fmt.Errorf("schema: Map key %q: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("non-finite number %v has no JSON form", x)
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64), nil
	case string:
		return AppendJSONString(b, x), nil
	case json.Number:
		if !json.Valid([]byte(x)) {
			return nil, fmt.Errorf("invalid json.Number %q", string(x))
		}
		return append(b, x...), nil
	case json.RawMessage:
		if !json.Valid(x) {
			return nil, fmt.Errorf("invalid raw JSON value")
		}
		return append(b, x...), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case Map:
		return x.AppendJSON(b)
	case *Map:
		if x == nil {
			return append(b, "null"...), nil
		}
		return x.AppendJSON(b)
	default:
		return nil, fmt.Errorf("unsupported value type %T", v)
	}
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD like encoding/json; HTML characters are not escaped; U+2028 and
// U+2029 are escaped.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == 0xFFFD && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

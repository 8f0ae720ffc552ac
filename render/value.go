package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lrstream/lrstream/schema"
)

// The recipe loader first turns YAML (or JSON, which is YAML) into plain
// values shaped like what Python's yaml.safe_load returns, then validates
// them with TrainingRecipe's rules. Values are:
//
//	nil, bool, int64, json.Number (an integer outside int64), float64,
//	string, []any, *dict
//
// dict keeps insertion order, like a Python dict.
type dict struct {
	keys []any
	vals []any
}

func (d *dict) get(key string) (any, bool) {
	for i, k := range d.keys {
		if s, ok := k.(string); ok && s == key {
			return d.vals[i], true
		}
	}
	return nil, false
}

// set stores key like a Python dict: an existing key keeps its position
// and takes the new value.
func (d *dict) set(key, val any) {
	for i, k := range d.keys {
		if keyEqual(k, key) {
			d.vals[i] = val
			return
		}
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, val)
}

func keyEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case nil:
		return b == nil
	default:
		fa, oka := numeric(a)
		fb, okb := numeric(b)
		if oka && okb {
			return fa == fb
		}
		return false
	}
}

// numeric returns the value of a Python number (bool counts, as in Python).
func numeric(v any) (float64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	}
	return 0, false
}

// limits against hostile YAML (alias bombs, deep nesting).
const (
	maxDepth = 200
	maxNodes = 100000
)

type yamlConv struct{ nodes int }

// fromYAML converts a parsed YAML document into plain values.
func fromYAML(data []byte) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		return nil, nil // empty document: yaml.safe_load returns None
	}
	c := &yamlConv{}
	return c.conv(&doc, 0)
}

func (c *yamlConv) conv(n *yaml.Node, depth int) (any, error) {
	c.nodes++
	if c.nodes > maxNodes {
		return nil, errors.New("YAML document too large (alias expansion?)")
	}
	if depth > maxDepth {
		return nil, errors.New("YAML document nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.conv(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, errors.New("YAML alias without anchor")
		}
		return c.conv(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			v, err := c.conv(e, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// mapping converts a mapping node to a dict, with YAML merge keys (<<).
func (c *yamlConv) mapping(n *yaml.Node, depth int) (any, error) {
	d := &dict{}
	var merges []*dict
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.ShortTag() == "!!merge" {
			var err error
			if merges, err = c.mergeValue(vn, depth, merges); err != nil {
				return nil, err
			}
			continue
		}
		k, err := c.conv(kn, depth+1)
		if err != nil {
			return nil, err
		}
		if _, bad := k.([]any); bad {
			return nil, fmt.Errorf("line %d: unhashable mapping key (a sequence)", kn.Line)
		}
		if _, bad := k.(*dict); bad {
			return nil, fmt.Errorf("line %d: unhashable mapping key (a mapping)", kn.Line)
		}
		v, err := c.conv(vn, depth+1)
		if err != nil {
			return nil, err
		}
		d.set(k, v)
	}
	mergeKeys(d, merges)
	return d, nil
}

// mergeValue converts the value of a merge key (a mapping or a sequence
// of mappings) and appends its mappings to merges.
func (c *yamlConv) mergeValue(vn *yaml.Node, depth int, merges []*dict) ([]*dict, error) {
	v, err := c.conv(vn, depth+1)
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case *dict:
		merges = append(merges, m)
	case []any:
		for _, e := range m {
			em, ok := e.(*dict)
			if !ok {
				return nil, fmt.Errorf("line %d: merge key needs mappings", vn.Line)
			}
			merges = append(merges, em)
		}
	default:
		return nil, fmt.Errorf("line %d: merge key needs a mapping", vn.Line)
	}
	return merges, nil
}

// mergeKeys adds to d the keys of merges it does not have: merged keys
// never override explicit ones.
func mergeKeys(d *dict, merges []*dict) {
	for _, m := range merges {
		for i, k := range m.keys {
			found := false
			for _, have := range d.keys {
				if keyEqual(have, k) {
					found = true
					break
				}
			}
			if !found {
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, m.vals[i])
			}
		}
	}
}

// scalar resolves a YAML scalar. yaml.v3 follows YAML 1.2; PyYAML (what
// LeRobot uses) follows YAML 1.1. We keep YAML 1.1's wider booleans
// (yes/no/on/off) so `target: no` means false as it does upstream, but
// resolve floats the YAML 1.2 way: `1e-3` is the number 0.001 here, while
// PyYAML would load it as the string "1e-3" (see docs/recipes.md).
func scalar(n *yaml.Node) (any, error) {
	tag := n.ShortTag()
	plain := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) == 0
	if plain {
		switch n.Value {
		case "yes", "Yes", "YES", "on", "On", "ON":
			return true, nil
		case "no", "No", "NO", "off", "Off", "OFF":
			return false, nil
		}
	}
	switch tag {
	case "!!null":
		return nil, nil
	case "!!bool":
		switch strings.ToLower(n.Value) {
		case "true", "yes", "on", "y":
			return true, nil
		case "false", "no", "off", "n":
			return false, nil
		}
		return nil, fmt.Errorf("line %d: invalid boolean %q", n.Line, n.Value)
	case "!!int":
		s := strings.ReplaceAll(n.Value, "_", "")
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			return i, nil
		}
		neg := strings.HasPrefix(s, "-")
		body := strings.TrimLeft(s, "+-")
		if u, err := strconv.ParseUint(body, 0, 64); err == nil {
			if neg {
				return json.Number("-" + strconv.FormatUint(u, 10)), nil
			}
			return json.Number(strconv.FormatUint(u, 10)), nil
		}
		if isDigits(body) {
			body = strings.TrimLeft(body, "0")
			if neg {
				return json.Number("-" + body), nil
			}
			return json.Number(body), nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, nil
		}
		return nil, fmt.Errorf("line %d: invalid integer %q", n.Line, n.Value)
	case "!!float":
		return parseYAMLFloat(n)
	}
	return n.Value, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseYAMLFloat(n *yaml.Node) (any, error) {
	v := strings.ReplaceAll(n.Value, "_", "")
	switch strings.ToLower(strings.TrimLeft(v, "+")) {
	case ".inf":
		return math.Inf(1), nil
	case "-.inf":
		return math.Inf(-1), nil
	case ".nan":
		return math.NaN(), nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return nil, fmt.Errorf("line %d: invalid float %q", n.Line, n.Value)
	}
	return f, nil
}

// decodeJSONOrdered decodes one JSON value into plain values, keeping
// object key order (Python's json.loads does too).
func decodeJSONOrdered(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("JSON value nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			out := []any{}
			for dec.More() {
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		case '{':
			d := &dict{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.set(k, v)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
			return t, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			// Python's json.loads turns overflowing floats into inf.
			var ne *strconv.NumError
			if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
				return f, nil
			}
			return nil, err
		}
		return f, nil
	default:
		return tok, nil // nil, bool, string
	}
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case json.Number:
		return strings.Trim(string(x), "-0") != ""
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *dict:
		return len(x.keys) > 0
	}
	return true
}

// pyTypeName is Python's type(v).__name__.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, json.Number:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *dict:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

func hashable(v any) bool {
	switch v.(type) {
	case []any, *dict:
		return false
	}
	return true
}

// pyRepr is Python's repr(v).
func pyRepr(v any) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// pyStr is Python's str(v).
func pyStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyRepr(v)
}

func writeRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case json.Number:
		s := string(x)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimLeft(strings.TrimPrefix(s, "-"), "0")
		if s == "" {
			b.WriteString("0")
			return
		}
		if neg {
			b.WriteByte('-')
		}
		b.WriteString(s)
	case float64:
		b.WriteString(pyFloatRepr(x))
	case string:
		b.WriteString(schema.PyQuote(x))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case *dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, x.vals[i])
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// pyFloatRepr is Python's repr(float): the shortest round-tripping digits,
// positional for decimal exponents in [-4, 16), scientific otherwise.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	sign := ""
	if math.Signbit(f) {
		sign = "-"
		f = -f
	}
	if f == 0 {
		return sign + "0.0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.dddde±XX
	epos := strings.IndexByte(s, 'e')
	mant, expStr := s[:epos], s[epos+1:]
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if exp >= -4 && exp < 16 {
		var out string
		if exp < 0 {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		} else if len(digits) <= exp+1 {
			out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
		} else {
			out = digits[:exp+1] + "." + digits[exp+1:]
		}
		return sign + out
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es = "-"
		exp = -exp
	}
	e := strconv.Itoa(exp)
	if len(e) < 2 {
		e = "0" + e
	}
	return sign + m + "e" + es + e
}

// toSchemaValue converts a plain value into a schema.Map JSON value.
func toSchemaValue(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toSchemaValue(e)
		}
		return out
	case *dict:
		m := schema.Map{Keys: make([]string, len(x.keys)), Values: make([]any, len(x.keys))}
		for i, k := range x.keys {
			m.Keys[i] = jsonKey(k)
			m.Values[i] = toSchemaValue(x.vals[i])
		}
		return m
	}
	return v
}

// jsonKey is how Python's json.dumps spells a dict key.
func jsonKey(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return pyFloatRepr(x)
	}
	return pyRepr(k)
}

package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/schema"
)

// pyYAMLFloat is PyYAML's (YAML 1.1) implicit float resolver. LeRobot
// loads recipes with PyYAML, so a plain scalar yaml.v3 (YAML 1.2) reads as
// a float but this does not match is a string to LeRobot: 1e-3, 1.0e3.
var pyYAMLFloat = regexp.MustCompile(`^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)

// cameraSel finds the camera selectors of binding expressions.
var cameraSel = regexp.MustCompile(`camera\s*=\s*([^,\s)]+)`)

// yamlNumberWarnings lists plain scalars yaml.v3 reads as floats while
// PyYAML reads strings, with their line numbers.
func yamlNumberWarnings(data []byte) []string {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil // the loader reports syntax errors
	}
	var out []string
	var walk func(n *yaml.Node, key string)
	walk = func(n *yaml.Node, key string) {
		if n.Kind == yaml.ScalarNode && n.Style == 0 && n.Tag == "!!float" && !pyYAMLFloat.MatchString(n.Value) {
			what := "this value"
			if key != "" {
				what = key
			}
			out = append(out, fmt.Sprintf("line %d: %s: %s is a number in YAML 1.2 but a string to PyYAML (YAML 1.1), which LeRobot loads recipes with; write it with a dot and a signed exponent (e.g. %s) so both agree",
				n.Line, what, n.Value, pyFloatSpelling(n.Value)))
		}
		for i, c := range n.Content {
			k := ""
			if n.Kind == yaml.MappingNode && i%2 == 1 {
				k = n.Content[i-1].Value
			}
			walk(c, k)
		}
	}
	walk(&root, "")
	return out
}

// pyFloatSpelling spells v so PyYAML reads a float.
func pyFloatSpelling(v string) string {
	var f float64
	if _, err := fmt.Sscan(strings.ReplaceAll(v, "_", ""), &f); err != nil {
		return "0.001"
	}
	s := fmt.Sprintf("%g", f)
	if !strings.ContainsAny(s, ".e") {
		return s + ".0"
	}
	if strings.Contains(s, "e") && !strings.Contains(s, ".") {
		mant, exp, _ := strings.Cut(s, "e")
		return mant + ".0e" + exp
	}
	return s
}

// weightWarning reports weights of the weighted draw that do not sum to 1.
func weightWarning(infos []render.ComponentInfo) string {
	sum, n := 0.0, 0
	for _, c := range infos {
		if c.Probability > 0 { // in the weighted draw
			sum += c.Weight
			n++
		}
	}
	if n == 0 || math.Abs(sum-1) < 1e-9 {
		return ""
	}
	return fmt.Sprintf("the weights of the weighted draw sum to %s, not 1: each component is drawn with probability weight / %s (the p(draw) column), as in LeRobot; scale them if you meant them as probabilities",
		fmt.Sprint(sum), fmt.Sprint(sum))
}

// cameraWarnings lists the cameras binding expressions select that the
// dataset lacks (a binding that then never resolves).
func cameraWarnings(infos []render.ComponentInfo, info *schema.Info, id string) []string {
	missing := map[string][]string{}
	for _, c := range infos {
		for _, b := range c.Bindings {
			for _, m := range cameraSel.FindAllStringSubmatch(b.Expr, -1) {
				cam := strings.Trim(m[1], `'"`)
				if _, ok := info.Feature(cam); !ok {
					name := b.Name
					if c.Name != "" {
						name = c.Name + "." + b.Name
					}
					missing[cam] = append(missing[cam], name)
				}
			}
		}
	}
	var cams []string
	for c := range missing {
		cams = append(cams, c)
	}
	sort.Strings(cams)
	var out []string
	for _, c := range cams {
		out = append(out, fmt.Sprintf("camera %s, read by %s, is not a feature of %s: those bindings never resolve on it", c, strings.Join(missing[c], ", "), id))
	}
	return out
}

// componentLine returns the YAML line of blend component name, or 0.
func componentLine(data []byte, name string) int {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil || len(root.Content) == 0 {
		return 0
	}
	top := root.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "blend" {
			continue
		}
		b := top.Content[i+1]
		for j := 0; j+1 < len(b.Content); j += 2 {
			if b.Content[j].Value == name {
				return b.Content[j].Line
			}
		}
	}
	return 0
}

// quotedName finds the first 'name' in an error message.
var quotedName = regexp.MustCompile(`'([^']+)'`)

// withLine prefixes a recipe error with the YAML line of the blend
// component it names, when there is one.
func withLine(data []byte, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "line ") {
		return err // yaml syntax errors carry their line
	}
	for _, m := range quotedName.FindAllStringSubmatch(msg, -1) {
		if l := componentLine(data, m[1]); l > 0 {
			return fmt.Errorf("line %d: %w", l, err)
		}
	}
	return err
}

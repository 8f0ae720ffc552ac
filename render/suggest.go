package render

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/lrstream/lrstream/internal/textdist"
	"github.com/lrstream/lrstream/schema"
)

// Keywords of the recipe forms, for "did you mean" suggestions.
func recipeKeywords() []string {
	return []string{"messages", "blend", "bindings", "weight", "route"}
}
func turnKeywords() []string {
	return []string{"role", "content", "stream", "target", "if_present", "tool_calls_from"}
}
func resolverNames() []string { return []string{"active_at", "emitted_at", "nth_prev", "nth_next"} }
func resolverKeywords() []string {
	return []string{"style", "role", "tool_name", "camera", "offset"}
}

// unexpectedKeyword finds the keyword of Python's "got an unexpected
// keyword argument 'X'" and LeRobot's "Unknown language resolver: 'X'".
var unexpectedKeyword = regexp.MustCompile(`(unexpected keyword argument|Unknown language resolver:) '([^']*)'`)

// didYouMean returns " (did you mean 'X'?)" for the candidate closest to
// got, or "" when none is close. It is appended to LeRobot's own error
// text, which stays as LeRobot words it.
func didYouMean(got string, candidates []string) string {
	best, bestD := "", 3
	g := strings.ToLower(got)
	for _, c := range candidates {
		if d := textdist.EditDistance(g, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(1, len(got)/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", schema.PyQuote(best))
}

// withSuggestion appends a "did you mean" to a recipe error naming an
// unknown keyword, resolver or style, choosing among candidates (the
// keywords of the form that raised it).
func withSuggestion(err error, candidates []string) error {
	if err == nil {
		return nil
	}
	var se *schema.UnknownStyleError
	if errors.As(err, &se) {
		var names []string
		for _, s := range schema.CoreStyles() {
			names = append(names, s.Name)
		}
		if s := didYouMean(se.Style, names); s != "" {
			return fmt.Errorf("%w%s", err, s)
		}
		return err
	}
	m := unexpectedKeyword.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	if m[1] != "unexpected keyword argument" {
		candidates = resolverNames()
	}
	if s := didYouMean(m[2], candidates); s != "" {
		return fmt.Errorf("%w%s", err, s)
	}
	return err
}

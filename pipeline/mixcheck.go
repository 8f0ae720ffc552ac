package pipeline

import "strings"

// mixRevision is a mixture header's revision: the datasets' revisions,
// comma-separated in --dataset order as the header's dataset names, or ""
// when none has one (local directories), as a single local dataset's
// header has.
func mixRevision(revs []string) string {
	for _, r := range revs {
		if r != "" {
			return strings.Join(revs, ",")
		}
	}
	return ""
}

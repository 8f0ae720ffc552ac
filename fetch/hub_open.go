package fetch

import (
	"context"
	"fmt"
	"os"
)

// OpenDataset opens spec as a local dataset directory when one exists at
// that path, and otherwise as a Hub dataset "ORG/NAME[@REVISION]" with
// OpenHub.
func OpenDataset(ctx context.Context, spec string, opts HubOptions) (Source, error) {
	if st, err := os.Stat(spec); err == nil {
		if !st.IsDir() {
			return nil, fmt.Errorf("dataset %s: not a directory", spec)
		}
		return NewDir(spec)
	}
	if _, _, err := ParseRepoSpec(spec); err != nil {
		return nil, fmt.Errorf("dataset %q: no such local directory, and not a Hub dataset id: %w", spec, err)
	}
	h, err := OpenHub(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	return h, nil
}

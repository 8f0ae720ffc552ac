// Package validate lints a LeRobot v3 dataset before a long training job:
// it reports every problem it finds instead of stopping at the first —
// info.json's meaning, the episodes index against itself, info.json's
// totals and the data files, every frame against the index and the task
// table, the language columns' invariants, the video files, and, given a
// recipe, what the recipe will do on the dataset. `lrstream validate`
// wires it to the command line; docs/validate.md lists the checks and the
// JSON report's schema.
package validate

// Package lrstream is a streaming dataloader for LeRobot v3 robot datasets
// with language columns. The root package only carries the embedded demo
// dataset and its default recipe; the loader lives in the subpackages and
// the lrstream command.
package lrstream

import (
	"embed"
	"io/fs"
)

//go:embed testdata/demo testdata/demo-recipe.yaml
var demoFiles embed.FS

// DemoName is the name the embedded demo dataset goes by (in logs and
// when no --dataset is given).
const DemoName = "lrstream-demo"

// Demo returns the embedded demo dataset: a small LeRobot v3 dataset with
// full language annotations (12 episodes, 1175 frames at 10 fps, cameras
// observation.images.front and observation.images.wrist, 6-dim state and
// action, documented language schema, 3 data files over 2 chunks) generated
// by `lrstream gen` (see docs/datagen.md). The returned FS is rooted at the
// dataset: it holds meta/info.json, meta/tasks.parquet, meta/stats.json,
// meta/episodes/chunk-000/file-000.parquet and data/chunk-*/file-*.parquet.
func Demo() fs.FS {
	sub, err := fs.Sub(demoFiles, "testdata/demo")
	if err != nil {
		panic("lrstream: embedded demo dataset missing: " + err.Error())
	}
	return sub
}

// DemoRecipe returns the default recipe for the demo dataset (LeRobot
// recipe YAML): a weighted blend of subtask prediction, low-level execution,
// planning, memory update, interjection response with `say` tool calls, and
// one `route: vqa` component per demo camera. The slice is a fresh copy.
func DemoRecipe() []byte {
	b, err := demoFiles.ReadFile("testdata/demo-recipe.yaml")
	if err != nil {
		panic("lrstream: embedded demo recipe missing: " + err.Error())
	}
	return b
}

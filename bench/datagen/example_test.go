package datagen_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lrstream/lrstream/bench/datagen"
)

// Generate a small annotated dataset with the pyarrow-inferred schema.
func ExampleGenerate() {
	tmp, err := os.MkdirTemp("", "datagen-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)

	res, err := datagen.Generate(context.Background(), filepath.Join(tmp, "ds"), datagen.Options{
		Episodes:  4,
		MinFrames: 100,
		MaxFrames: 200,
		FPS:       15,
		Cameras:   []string{"top", "wrist"},
		Dim:       6,
		Density:   datagen.DensityFull,
		Variant:   datagen.VariantInferred,
		Seed:      1,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Episodes, "episodes,", res.DataFiles, "data file")
	// Output: 4 episodes, 1 data file
}

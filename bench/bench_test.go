package bench

import (
	"context"
	"testing"

	"github.com/lrstream/lrstream"
	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/pipeline"
	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/shard"
)

func demoConfig(t testing.TB) *pipeline.Config {
	t.Helper()
	ctx := context.Background()
	src := fetch.NewFS(lrstream.DemoName, lrstream.Demo())
	rec, err := render.Load(lrstream.DemoRecipe(), "demo-recipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := shard.OpenDataset(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	return &pipeline.Config{Source: src, Dataset: ds, Recipe: rec}
}

func TestRunDemo(t *testing.T) {
	cfg := demoConfig(t)
	rep, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != len(Stages) {
		t.Fatalf("%d stages", len(rep.Stages))
	}
	for i, st := range rep.Stages {
		if st.Name != Stages[i] {
			t.Errorf("stage %d is %s", i, st.Name)
		}
		if st.Frames != 1175 {
			t.Errorf("%s: %d frames", st.Name, st.Frames)
		}
		if st.Bytes <= 0 || st.FramesPerSec <= 0 || st.NsPerFrame <= 0 || st.AllocsPerFrame <= 0 {
			t.Errorf("%s: %+v", st.Name, st)
		}
		if st.PeakRSS == 0 {
			t.Errorf("%s: no peak RSS", st.Name)
		}
	}
	if r := rep.Stage(StageRender); r.Rendered == 0 {
		t.Errorf("render: nothing rendered")
	}
	if s := rep.Stage(StageStream); s.Batches == 0 || s.OutBytes == 0 {
		t.Errorf("stream: %d batches, %d bytes", s.Batches, s.OutBytes)
	}
	if rep.StreamOverScan <= 0 || rep.RenderOverScan <= 0 {
		t.Errorf("ratios %v %v", rep.StreamOverScan, rep.RenderOverScan)
	}
	if cfg.Workers != 0 || cfg.Source.ID() != lrstream.DemoName {
		t.Error("Run modified cfg")
	}
}

func TestRunUnknownStage(t *testing.T) {
	if _, err := Run(context.Background(), demoConfig(t), Options{Stages: []string{"encode"}}); err == nil {
		t.Fatal("no error")
	}
}

// TestScanAndDecodeAgree: both scans see every frame of the plan.
func TestScanAndDecodeAgree(t *testing.T) {
	cfg := demoConfig(t)
	ctx := context.Background()
	a, err := naiveScan(ctx, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decode(ctx, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a != int64(cfg.Dataset.Info.TotalFrames) {
		t.Fatalf("scan %d, decode %d, info %d", a, b, cfg.Dataset.Info.TotalFrames)
	}
}

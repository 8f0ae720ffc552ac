package pipeline

import (
	"bytes"
	"context"
	"testing"

	"github.com/lrstream/lrstream/render"
	"github.com/lrstream/lrstream/sink"
)

// TestCheckStart: CheckStart refuses exactly what the stream itself
// refuses before its first batch, with the same error, and accepts what
// the stream accepts (each case is also streamed).
func TestCheckStart(t *testing.T) {
	tests := []struct {
		name     string
		deltas   string
		features []string
		to       *TrainOptions
		wantErr  bool
	}{
		{name: "nothing to check"},
		{name: "numeric key", deltas: "action=0:3/10"},
		{name: "unknown key", deltas: "foo=1", wantErr: true},
		{name: "offset off the frame grid", deltas: "observation.state=0.01", wantErr: true},
		{name: "key outside --features", deltas: "observation.state=0", features: []string{"action"}, wantErr: true},
		{name: "key in --features", deltas: "action=-1/10,0", features: []string{"action"}},
		{name: "camera not decoded", deltas: "observation.images.front=0", wantErr: true},
		{name: "training", to: &TrainOptions{Shuffle: true, Epochs: 1}},
		{name: "training, unknown key", deltas: "foo=1", to: &TrainOptions{Epochs: 1}, wantErr: true},
		{name: "resume token", to: &TrainOptions{Epochs: 1, Resume: "garbage"}, wantErr: true},
		{name: "partitions", to: &TrainOptions{Epochs: 1, Order: OrderPartitioned, Partitions: 3, Consumers: 2, Consumer: 1, WorldSize: 2}, wantErr: true},
		{name: "partitions divisible", to: &TrainOptions{Epochs: 1, Order: OrderPartitioned, Partitions: 4, Consumers: 2, Consumer: 1, WorldSize: 2}},
		{name: "unknown order", to: &TrainOptions{Epochs: 1, Order: "random"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := demoConfig(t, render.ModeFallback)
			cfg.Features = tc.features
			var err error
			if cfg.Deltas, err = ParseDeltaTimestamps(tc.deltas); err != nil {
				t.Fatal(err)
			}
			// --cameras none: the demo's cameras are not decoded ("camera not
			// decoded"), and no case needs their frames.
			if err := SetupCameras(context.Background(), cfg, CameraOptions{Spec: "none"}); err != nil {
				t.Fatal(err)
			}
			so := StreamOptions{BatchSize: 16}
			mix := []Mix{{Config: cfg, Weight: 1}}
			checkErr := CheckStart(mix, so, tc.to)
			if (checkErr != nil) != tc.wantErr {
				t.Fatalf("CheckStart: %v, want an error: %v", checkErr, tc.wantErr)
			}
			var buf bytes.Buffer
			var streamErr error
			if tc.to != nil {
				_, streamErr = TrainMix(context.Background(), mix, so, *tc.to, sink.NewMsgpack(&buf))
			} else {
				_, streamErr = Stream(context.Background(), cfg, so, sink.NewMsgpack(&buf))
			}
			if (checkErr == nil) != (streamErr == nil) || (checkErr != nil && checkErr.Error() != streamErr.Error()) {
				t.Fatalf("CheckStart: %v; the stream: %v", checkErr, streamErr)
			}
		})
	}
}

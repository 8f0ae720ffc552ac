package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/lrstream/lrstream/collate"
	"github.com/lrstream/lrstream/shard"
)

// readEmitted reads unit u and converts its numeric features to the dtype
// and shape LeRobotDataset returns (collate.Emitted: int64, float32, bool;
// a shape (1,) feature as a scalar), so every stage after the read —
// windows, batches, the header — sees the emitted columns.
func readEmitted(ctx context.Context, cfg *Config, u shard.Unit, opts shard.Options) (*shard.Batch, error) {
	b, err := shard.ReadUnit(ctx, cfg.Source, cfg.Dataset, u, opts)
	if err != nil {
		return nil, err
	}
	if err := emitFeatures(u, b); err != nil {
		return nil, err
	}
	return b, nil
}

// emitFeatures converts b's numeric features in place (collate.ConvertData).
func emitFeatures(u shard.Unit, b *shard.Batch) error {
	for k := range b.Features {
		fd := &b.Features[k]
		e, err := collate.Emitted(collate.Feature{Name: fd.Name, DType: fd.DType, Shape: fd.Shape})
		if err != nil {
			return fmt.Errorf("%s row group %d: %w", u.File, u.RowGroup, err)
		}
		data, err := collate.ConvertData(fd.DType, fd.Data)
		if err != nil {
			return convertError(u, b, fd, err)
		}
		fd.DType, fd.Shape, fd.Data = e.DType, e.Shape, data
	}
	return nil
}

// convertError names the file, row group, episode and frame of a value
// the conversion refused.
func convertError(u shard.Unit, b *shard.Batch, fd *shard.FeatureData, err error) error {
	var ce *collate.ConvertError
	per := max(collate.Feature{Shape: fd.Shape}.Elems(), 1)
	if errors.As(err, &ce) && ce.Elem/per < b.Len() {
		j := ce.Elem / per
		return fmt.Errorf("%s row group %d: episode %d, index %d, frame %d: feature %s (%s): %w",
			u.File, u.RowGroup, b.EpisodeIndex[j], b.Index[j], b.FrameIndex[j], fd.Name, shardDTypeName(fd.DType), err)
	}
	return fmt.Errorf("%s row group %d: feature %s: %w", u.File, u.RowGroup, fd.Name, err)
}

// shardDTypeName is the info.json name of a numpy dtype string.
func shardDTypeName(dt string) string {
	for _, n := range []string{"float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool"} {
		if d, _ := numpyDType(n); d == dt {
			return n
		}
	}
	return dt
}

// deltaCameraKeys refuses a --delta-timestamps key that names one of the
// dataset's cameras whose frames the stream does not carry, saying why
// (--cameras none or a list without it, video files absent, a kind lrstream
// does not decode) instead of "not one of the emitted numeric features".
func deltaCameraKeys(cfg *Config, features []collate.Feature) error {
	emitted := map[string]bool{}
	for _, f := range features {
		emitted[f.Name] = true
	}
	for _, d := range cfg.Deltas {
		if emitted[d.Key] {
			continue
		}
		f, ok := cfg.Dataset.Info.Feature(d.Key)
		if !ok || (f.DType != "video" && f.DType != "image") {
			continue
		}
		why := "not decoded (--cameras)"
		for _, c := range cfg.CameraStatus {
			if c.Key == d.Key && c.Reason != "" {
				why = "not decoded: " + c.Reason
			}
		}
		return fmt.Errorf("--delta-timestamps: %s is a camera, and this stream carries no frames of it (%s); decode it with --cameras %s (or all), or drop it from --delta-timestamps", d.Key, why, d.Key)
	}
	return nil
}

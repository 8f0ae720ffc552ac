package validate

import (
	"context"

	"github.com/lrstream/lrstream/schema"
	"github.com/lrstream/lrstream/shard"
	"github.com/lrstream/lrstream/video"
)

// imageCamera returns image feature k's camera as stream decodes it (RGB,
// or a depth image), or why stream cannot (video.NewCamera, the check
// pipeline.SetupCameras makes).
func imageCamera(info *schema.Info, k string) (video.Camera, error) {
	f, _ := info.Feature(k)
	return video.NewCamera(f, video.DepthMillimetres)
}

// imageChecker checks the image features' encoded images of every frame,
// as stream decodes them (video.CheckImage; whole with Deep).
type imageChecker struct {
	v    *validator
	keys []string
	cams []video.Camera
}

func (v *validator) imageChecker() *imageChecker {
	ic := &imageChecker{v: v}
	for _, k := range video.ImageKeys(&v.ds.Info) {
		cam, err := imageCamera(&v.ds.Info, k)
		if err != nil {
			continue // cameraShapes reports it
		}
		ic.keys, ic.cams = append(ic.keys, k), append(ic.cams, cam)
	}
	if len(ic.keys) > 0 {
		what := "images: every frame's image present, an image of info.json's size (header), within PIL's pixel limit, PNG chunks whole with correct CRCs"
		if v.opts.Deep {
			what = "images (--deep): every frame's image decoded whole at info.json's size"
		} else {
			v.notChecked("images: not decoded (--deep decodes every image: damaged compressed data inside intact chunks is found only so)")
		}
		v.checked(what)
	}
	return ic
}

// unit checks the images of the frames of batch b (unit u).
func (ic *imageChecker) unit(ctx context.Context, u shard.Unit, b *shard.Batch) {
	if len(ic.keys) == 0 {
		return
	}
	enc, err := shard.ReadImageBytes(ctx, ic.v.src, u.File, u.RowGroup, ic.keys)
	if err != nil {
		ic.v.c.addErr(Error, CheckImage, err)
		return
	}
	for k, key := range ic.keys {
		m := enc[key]
		for i, idx := range b.Index {
			data, ok := m[idx]
			if err := video.CheckImage(data, ok && data != nil, ic.cams[k], ic.v.opts.Deep); err != nil {
				ic.v.c.add(Finding{Severity: Error, Check: CheckImage, File: b.File, RowGroup: iptr(u.RowGroup), Episode: i64(b.EpisodeIndex[i]),
					Index: i64(idx), Column: key, Message: err.Error() + " (stream fails this frame)"})
			}
		}
	}
}

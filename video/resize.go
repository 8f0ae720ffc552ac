package video

import "math"

// Resizing of image features (--resize with dtype "image" cameras).
//
// The interpolation is torchvision's default for tensors,
// torchvision.transforms.v2.functional.resize(img, [H, W]) with
// InterpolationMode.BILINEAR and antialias=True, bit for bit as torch
// computes it for uint8 images on x86 CPUs (the uint8 path of
// torch.nn.functional.interpolate(mode="bilinear", antialias=True), which
// follows Pillow's resampling): a triangle filter widened by the
// scale factor when shrinking (so every input pixel contributes, as in
// PIL's Image.resize(BILINEAR)), separable — horizontal pass first, into
// uint8, then vertical — with the weights of each output pixel normalized
// in float64 and rounded to int16 fixed point. See docs/video.md
// ("Resize") for why this one.

// axisFilter holds the fixed-point weights resizing one axis from in to
// out samples: output i is sum_j src[start[i]+j]*weights[i*k+j] for j <
// size[i], rounded and shifted right by precision.
type axisFilter struct {
	start, size []int
	weights     []int32
	k           int
	precision   uint
}

// newAxisFilter computes torch's antialiased bilinear weights (align_corners
// false, no explicit scale factor) for resizing in samples to out.
func newAxisFilter(in, out int) axisFilter {
	scale := float64(in) / float64(out)
	support, invScale := 1.0, 1.0
	if scale >= 1 {
		support, invScale = scale, 1/scale
	}
	k := int(math.Ceil(support))*2 + 1
	f := axisFilter{start: make([]int, out), size: make([]int, out), weights: make([]int32, out*k), k: k}
	w := make([]float64, out*k)
	maxW := 0.0
	for i := 0; i < out; i++ {
		center := scale * (float64(i) + 0.5)
		lo := max(int(center-support+0.5), 0)
		n := min(int(center+support+0.5), in) - lo
		f.start[i], f.size[i] = lo, n
		total := 0.0
		ws := w[i*k : i*k+n]
		for j := range ws {
			x := math.Abs((float64(j+lo) - center + 0.5) * invScale)
			if x < 1 {
				ws[j] = 1 - x
			}
			total += ws[j]
		}
		if total != 0 {
			for j := range ws {
				ws[j] /= total
			}
		}
		for _, v := range ws {
			maxW = max(maxW, v)
		}
	}
	// The largest precision whose rounded maximum weight fits int16.
	for f.precision = 0; f.precision < 22; f.precision++ {
		if int(0.5+maxW*float64(int(1)<<(f.precision+1))) >= 1<<15 {
			break
		}
	}
	for i, v := range w {
		v *= float64(int(1) << f.precision)
		if v < 0 {
			f.weights[i] = int32(int16(-0.5 + v))
		} else {
			f.weights[i] = int32(int16(0.5 + v))
		}
	}
	return f
}

// apply computes one output sample from the samples at src[start*step],
// src[(start+1)*step], ...
func (f *axisFilter) apply(i int, src []byte, off, step int) byte {
	acc := int32(1) << (f.precision - 1)
	ws := f.weights[i*f.k : i*f.k+f.size[i]]
	p := off + f.start[i]*step
	for _, w := range ws {
		acc += int32(src[p]) * w
		p += step
	}
	acc >>= f.precision
	return byte(min(max(acc, 0), 255))
}

// resizePlanes resizes c planes of sh×sw bytes in src into c planes of
// dh×dw bytes in dst (CHW), as resize documents: the width first (into a
// temporary sh×dw plane), then the height; an axis whose size does not
// change is not filtered.
func resizePlanes(src []byte, c, sh, sw int, dst []byte, dh, dw int) {
	hf, vf := newAxisFilter(sw, dw), newAxisFilter(sh, dh)
	var tmp []byte
	if sw != dw && sh != dh {
		tmp = make([]byte, sh*dw)
	}
	for ch := 0; ch < c; ch++ {
		in := src[ch*sh*sw : (ch+1)*sh*sw]
		out := dst[ch*dh*dw : (ch+1)*dh*dw]
		mid := in // sh × dw after the horizontal pass
		if sw != dw {
			mid = out
			if sh != dh {
				mid = tmp
			}
			for y := 0; y < sh; y++ {
				row := mid[y*dw : (y+1)*dw]
				for x := range row {
					row[x] = hf.apply(x, in, y*sw, 1)
				}
			}
		}
		if sh != dh {
			for y := 0; y < dh; y++ {
				row := out[y*dw : (y+1)*dw]
				for x := range row {
					row[x] = vf.apply(y, mid, x, dw)
				}
			}
		} else if sw == dw {
			copy(out, in)
		}
	}
}

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

// horizontal filters each of the rows of in (row length len(in)/rows)
// into the rows of out (row length len(f.start)).
func (f *axisFilter) horizontal(in, out []byte, rows int) {
	sw, dw := len(in)/rows, len(f.start)
	bias := int32(1) << (f.precision - 1)
	for y := 0; y < rows; y++ {
		row, dst := in[y*sw:(y+1)*sw], out[y*dw:(y+1)*dw]
		for x := range dst {
			n := f.size[x]
			ws := f.weights[x*f.k : x*f.k+n]
			px := row[f.start[x] : f.start[x]+n]
			px = px[:len(ws)] // no bounds checks below
			acc := bias
			for j, w := range ws {
				acc += int32(px[j]) * w
			}
			dst[x] = clamp8(acc >> f.precision)
		}
	}
}

// vertical filters the columns of in (rows of width w) into out (len(f.start)
// rows of width w), a whole output row at a time; acc is scratch of w.
func (f *axisFilter) vertical(in, out []byte, w int, acc []int32) {
	bias := int32(1) << (f.precision - 1)
	for y := range f.start {
		for x := range acc {
			acc[x] = bias
		}
		n := f.size[y]
		for j, wt := range f.weights[y*f.k : y*f.k+n] {
			row := in[(f.start[y]+j)*w : (f.start[y]+j+1)*w]
			row = row[:len(acc)] // no bounds checks below
			for x, v := range row {
				acc[x] += int32(v) * wt
			}
		}
		dst := out[y*w : (y+1)*w]
		for x, a := range acc {
			dst[x] = clamp8(a >> f.precision)
		}
	}
}

func clamp8(v int32) byte {
	return byte(min(max(v, 0), 255))
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
	acc := make([]int32, dw)
	for ch := 0; ch < c; ch++ {
		in := src[ch*sh*sw : (ch+1)*sh*sw]
		out := dst[ch*dh*dw : (ch+1)*dh*dw]
		switch {
		case sw != dw && sh != dh:
			hf.horizontal(in, tmp, sh)
			vf.vertical(tmp, out, dw, acc)
		case sw != dw:
			hf.horizontal(in, out, sh)
		case sh != dh:
			vf.vertical(in, out, dw, acc)
		default:
			copy(out, in)
		}
	}
}

package video

import (
	"errors"
	"fmt"
	"image"
)

// decodeJPEG decodes a JPEG the way libjpeg-turbo's default decompression
// does — what PIL, and so LeRobot, runs on image features: Huffman
// decoding (sequential or progressive), dequantization, the accurate
// integer inverse DCT (libjpeg's "islow": Loeffler–Ligtenberg–Moschytz with
// 13-bit fixed-point constants, two passes, 2 extra bits between them),
// then the fancy upsampling and colour conversion of jpegconv.go. It takes
// 8-bit Huffman-coded files (SOF0, SOF1, SOF2) with one (gray) or three
// (YCbCr, or RGB) components sampled 4:4:4, 4:2:2 or 4:2:0, with or without
// restart markers. Anything else — arithmetic or lossless coding, 12-bit
// samples, CMYK, 4:4:0, a progressive file libjpeg would smooth — reports
// ok false and the caller decodes with image/jpeg (exact in the colour
// conversion, not in the inverse DCT).
func decodeJPEG(b []byte) (img image.Image, ok bool, err error) {
	return decodeJPEGLimit(b, 2*MaxImagePixels)
}

// decodeJPEGLimit is decodeJPEG refusing images of more than limit pixels
// before allocating their planes.
func decodeJPEGLimit(b []byte, limit int64) (img image.Image, ok bool, err error) {
	d := jpegDecoder{data: b, limit: limit}
	img, err = d.decode()
	if errors.Is(err, errJPEGUnsupported) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return img, true, nil
}

var errJPEGUnsupported = errors.New("jpeg: not a baseline file this decoder takes")

type jpegComponent struct {
	id, h, v, tq int
	td, ta       int // Huffman table indices
	bw, bh       int // blocks per line and column (of the padded plane)
	pix          []byte
	pred         int
	done         bool    // decoded by a scan (sequential files)
	coefs        []int32 // progressive files: every block's coefficients, natural order
	// bits is, for coefficients 0..9 of a progressive file, the point
	// transform of the last scan that sent them (-1: none yet): libjpeg's
	// coef_bits, which decide whether it smooths the blocks.
	bits [10]int
}

type huffTable struct {
	// lookup by code length: codes of length l are mincode[l]..maxcode[l],
	// their values at vals[valptr[l]+code-mincode[l]].
	mincode, maxcode [17]int32
	valptr           [17]int32
	vals             []byte
	defined          bool
	// lut decodes the codes of up to 8 bits from the next 8 bits:
	// length<<8 | value, 0 for a longer code.
	lut [256]uint16
}

type jpegDecoder struct {
	data  []byte
	pos   int
	limit int64 // most pixels decoded

	width, height int
	comps         []jpegComponent
	hmax, vmax    int
	quant         [4][64]int32
	haveQuant     [4]bool
	dc, ac        [4]huffTable
	restart       int
	frame         bool
	jfif, adobe   bool // the APP0 JFIF and APP14 Adobe markers were seen
	rgb           bool // three components that are R, G, B, not Y, Cb, Cr
	hs, vs        int  // the chroma's subsampling (1 or 2 each)

	// entropy decoder state
	bits  uint32
	nbits int
	mark  bool // a marker was met: the rest reads as zero bits
	eof   bool // the data ended inside a scan

	progressive bool
	eobrun      int // progressive AC scans: blocks left in an end-of-band run
}

// zigzag[k] is the natural (row-major) index of the k-th coefficient.
var zigzag = [64]int{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
}

func (d *jpegDecoder) u8() (int, error) {
	if d.pos >= len(d.data) {
		return 0, errors.New("jpeg: unexpected end of file")
	}
	c := d.data[d.pos]
	d.pos++
	return int(c), nil
}

func (d *jpegDecoder) u16() (int, error) {
	if d.pos+2 > len(d.data) {
		return 0, errors.New("jpeg: unexpected end of file")
	}
	v := int(d.data[d.pos])<<8 | int(d.data[d.pos+1])
	d.pos += 2
	return v, nil
}

// segment returns the payload of the marker segment at d.pos.
func (d *jpegDecoder) segment() ([]byte, error) {
	n, err := d.u16()
	if err != nil {
		return nil, err
	}
	if n < 2 || d.pos+n-2 > len(d.data) {
		return nil, errors.New("jpeg: bad segment length")
	}
	p := d.data[d.pos : d.pos+n-2]
	d.pos += n - 2
	return p, nil
}

func (d *jpegDecoder) decode() (image.Image, error) {
	if len(d.data) < 2 || d.data[0] != 0xFF || d.data[1] != 0xD8 {
		return nil, errors.New("jpeg: missing SOI marker")
	}
	d.pos = 2
	for {
		// Find the next marker (fill bytes 0xFF may precede it).
		c, err := d.u8()
		if err != nil {
			return nil, err
		}
		if c != 0xFF {
			return nil, fmt.Errorf("jpeg: expected a marker at byte %d", d.pos-1)
		}
		m := 0xFF
		for m == 0xFF {
			if m, err = d.u8(); err != nil {
				return nil, err
			}
		}
		switch {
		case m == 0xD9: // EOI
			if d.progressive && d.frame {
				return d.finishProgressive()
			}
			return nil, errors.New("jpeg: no image data before EOI")
		case m >= 0xC3 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			return nil, errJPEGUnsupported // lossless, arithmetic coding
		case m == 0xC0 || m == 0xC1 || m == 0xC2 || m == 0xC4 || m == 0xDA || m == 0xDB || m == 0xDD ||
			(m >= 0xE0 && m <= 0xEF) || m == 0xFE || m == 0xDC || m == 0xDE || m == 0xDF:
			p, err := d.segment()
			if err != nil {
				return nil, err
			}
			if err := d.marker(m, p); err != nil {
				return nil, err
			}
			if m == 0xDA && !d.progressive && d.scansDone() {
				return d.image()
			}
		default:
			return nil, errJPEGUnsupported
		}
	}
}

// marker takes the segment p of marker m.
func (d *jpegDecoder) marker(m int, p []byte) error {
	switch m {
	case 0xC0, 0xC1, 0xC2: // baseline, extended sequential, progressive (Huffman)
		d.progressive = m == 0xC2
		return d.sof(p)
	case 0xC4:
		return d.dht(p)
	case 0xDB:
		return d.dqt(p)
	case 0xDA:
		return d.sos(p)
	case 0xDD:
		if len(p) != 2 {
			return errors.New("jpeg: bad DRI segment")
		}
		d.restart = int(p[0])<<8 | int(p[1])
	case 0xE0:
		if len(p) >= 5 && string(p[:5]) == "JFIF\x00" {
			d.jfif = true
		}
	case 0xEE:
		if len(p) >= 12 && string(p[:5]) == "Adobe" {
			d.adobe = true
			switch p[11] {
			case 0: // no transform: RGB (or CMYK, refused by sof)
				d.rgb = true
			case 1: // YCbCr
			default: // YCCK
				return errJPEGUnsupported
			}
		}
	}
	return nil // other APPn, COM, DNL, DHP, EXP: nothing to take
}

func (d *jpegDecoder) sof(p []byte) error {
	if d.frame {
		return errors.New("jpeg: two frames")
	}
	d.frame = true
	if len(p) < 6 {
		return errors.New("jpeg: short SOF segment")
	}
	if p[0] != 8 {
		return errJPEGUnsupported // 12-bit samples
	}
	d.height, d.width = int(p[1])<<8|int(p[2]), int(p[3])<<8|int(p[4])
	n := int(p[5])
	if d.width == 0 || d.height == 0 {
		return errJPEGUnsupported // DNL-defined height, or no pixels
	}
	if int64(d.width)*int64(d.height) > d.limit {
		return fmt.Errorf("jpeg: %dx%d is more than %d pixels", d.width, d.height, d.limit)
	}
	if (n != 1 && n != 3) || len(p) != 6+3*n {
		return errJPEGUnsupported
	}
	for i := range n {
		q := p[6+3*i:]
		c := jpegComponent{id: int(q[0]), h: int(q[1] >> 4), v: int(q[1] & 15), tq: int(q[2])}
		if c.h < 1 || c.h > 2 || c.v < 1 || c.v > 2 || c.tq > 3 {
			return errJPEGUnsupported
		}
		d.comps = append(d.comps, c)
	}
	if n == 1 {
		d.comps[0].h, d.comps[0].v = 1, 1 // a single component's sampling factors do not matter
	}
	if n == 3 && !d.jfif && !d.adobe && d.comps[0].id == 'R' && d.comps[1].id == 'G' && d.comps[2].id == 'B' {
		d.rgb = true // as libjpeg takes these component names
	}
	for _, c := range d.comps {
		d.hmax, d.vmax = max(d.hmax, c.h), max(d.vmax, c.v)
	}
	d.hs, d.vs = 1, 1
	if n == 3 {
		// Luma at the full rate, both chroma components at one rate that
		// is the luma's (4:4:4), half of it across (4:2:2) or half both
		// ways (4:2:0) — whatever factors say so (FFmpeg writes 4:4:4 as
		// 1×2 for all three).
		y, cb, cr := d.comps[0], d.comps[1], d.comps[2]
		if y.h != d.hmax || y.v != d.vmax || cb.h != cr.h || cb.v != cr.v || d.hmax%cb.h != 0 || d.vmax%cb.v != 0 {
			return errJPEGUnsupported
		}
		d.hs, d.vs = d.hmax/cb.h, d.vmax/cb.v
		if (d.hs == 1 && d.vs == 2) || (d.rgb && d.hs*d.vs != 1) {
			return errJPEGUnsupported // 4:4:0; subsampled RGB
		}
	}
	mcusX := (d.width + 8*d.hmax - 1) / (8 * d.hmax)
	mcusY := (d.height + 8*d.vmax - 1) / (8 * d.vmax)
	for i := range d.comps {
		c := &d.comps[i]
		c.bw, c.bh = mcusX*c.h, mcusY*c.v
		if int64(c.bw)*int64(c.bh)*64 > 1<<31 {
			return errors.New("jpeg: image too large")
		}
		c.pix = make([]byte, c.bw*8*c.bh*8)
		if d.progressive {
			c.coefs = make([]int32, c.bw*c.bh*64)
			c.bits = [10]int{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1}
		}
	}
	return nil
}

func (d *jpegDecoder) dqt(p []byte) error {
	for len(p) > 0 {
		pq, tq := int(p[0]>>4), int(p[0]&15)
		if tq > 3 || pq > 1 {
			return errors.New("jpeg: bad DQT segment")
		}
		n := 64 * (1 + pq)
		if len(p) < 1+n {
			return errors.New("jpeg: short DQT segment")
		}
		for k := range 64 {
			v := int32(p[1+k])
			if pq == 1 {
				v = int32(p[1+2*k])<<8 | int32(p[2+2*k])
			}
			d.quant[tq][zigzag[k]] = v
		}
		d.haveQuant[tq] = true
		p = p[1+n:]
	}
	return nil
}

func (d *jpegDecoder) dht(p []byte) error {
	for len(p) > 0 {
		if len(p) < 17 {
			return errors.New("jpeg: short DHT segment")
		}
		tc, th := int(p[0]>>4), int(p[0]&15)
		if tc > 1 || th > 3 {
			return errors.New("jpeg: bad DHT segment")
		}
		total := 0
		for l := 1; l <= 16; l++ {
			total += int(p[l])
		}
		if total > 256 || len(p) < 17+total {
			return errors.New("jpeg: bad DHT segment")
		}
		t := &d.dc[th]
		if tc == 1 {
			t = &d.ac[th]
		}
		*t = huffTable{vals: append([]byte(nil), p[17:17+total]...), defined: true}
		code, k := int32(0), int32(0)
		for l := 1; l <= 16; l++ {
			n := int32(p[l])
			t.valptr[l] = k
			t.mincode[l] = code
			code += n
			k += n
			t.maxcode[l] = code - 1
			if n == 0 {
				t.maxcode[l] = -1
			}
			if code > 1<<l {
				return errors.New("jpeg: bad Huffman table")
			}
			if l <= 8 {
				for c := t.mincode[l]; c <= t.maxcode[l]; c++ {
					v := uint16(l)<<8 | uint16(t.vals[t.valptr[l]+c-t.mincode[l]])
					for x := range int32(1) << (8 - l) {
						t.lut[c<<(8-l)|x] = v
					}
				}
			}
			code <<= 1
		}
		p = p[17+total:]
	}
	return nil
}

// scansDone reports whether every component has been decoded.
func (d *jpegDecoder) scansDone() bool {
	for _, c := range d.comps {
		if !c.done {
			return false
		}
	}
	return true
}

func (d *jpegDecoder) sos(p []byte) error {
	if !d.frame {
		return errors.New("jpeg: SOS before SOF")
	}
	if len(p) < 1 {
		return errors.New("jpeg: short SOS segment")
	}
	ns := int(p[0])
	if ns < 1 || len(p) != 4+2*ns {
		return errors.New("jpeg: bad SOS segment")
	}
	ss, se, ah, al := int(p[1+2*ns]), int(p[2+2*ns]), int(p[3+2*ns]>>4), int(p[3+2*ns]&15)
	if !d.progressive && (ss != 0 || se != 63 || ah != 0 || al != 0) {
		return errJPEGUnsupported
	}
	if d.progressive && (ss > se || se > 63 || (ss == 0 && se != 0) || (ss > 0 && ns != 1) || al > 13 || ah > 13) {
		return errors.New("jpeg: bad progressive scan parameters")
	}
	var scan []*jpegComponent
	for i := range ns {
		id := int(p[1+2*i])
		var c *jpegComponent
		for j := range d.comps {
			if d.comps[j].id == id {
				c = &d.comps[j]
			}
		}
		if c == nil || c.done {
			return errors.New("jpeg: SOS names an unknown or already decoded component")
		}
		c.td, c.ta = int(p[2+2*i]>>4), int(p[2+2*i]&15)
		needDC, needAC := ss == 0 && ah == 0, se > 0
		if c.td > 3 || c.ta > 3 || (needDC && !d.dc[c.td].defined) || (needAC && !d.ac[c.ta].defined) || !d.haveQuant[c.tq] {
			return errors.New("jpeg: SOS refers to an undefined table")
		}
		scan = append(scan, c)
	}
	if d.progressive {
		for _, c := range scan {
			for k := ss; k <= min(se, 9); k++ {
				c.bits[k] = al
			}
		}
		err := d.scanProgressive(scan, ss, se, ah, al)
		if err == nil && d.eof {
			err = errors.New("jpeg: the data ends inside a scan (file cut short)")
		}
		return err
	}
	if err := d.scan(scan); err != nil {
		return err
	}
	if d.eof {
		return errors.New("jpeg: the data ends inside a scan (file cut short)")
	}
	for _, c := range scan {
		c.done = true
	}
	return nil
}

// scan decodes the entropy-coded data of one sequential scan into its
// components' planes.
func (d *jpegDecoder) scan(comps []*jpegComponent) error {
	var coef [64]int32
	return d.blocks(comps, func(c *jpegComponent, bx, by int) error {
		if err := d.block(c, &coef); err != nil {
			return err
		}
		stride := c.bw * 8
		idctIslow(&coef, &d.quant[c.tq], c.pix[by*8*stride+bx*8:], stride)
		return nil
	})
}

// blocks runs fn on every block of a scan in the order the scan codes
// them — MCU by MCU for an interleaved scan, the component's own blocks
// (not the MCU-padded ones) for a single-component one — reading the
// restart marker at each restart interval (and resetting the DC
// predictions and the end-of-band run there), then moves past the scan's
// data. A scan whose data ends early stops at the next row (d.eof says so).
func (d *jpegDecoder) blocks(comps []*jpegComponent, fn func(c *jpegComponent, bx, by int) error) error {
	d.bits, d.nbits, d.mark, d.eobrun = 0, 0, false, 0
	for _, c := range comps {
		c.pred = 0
	}
	mcusX := (d.width + 8*d.hmax - 1) / (8 * d.hmax)
	mcusY := (d.height + 8*d.vmax - 1) / (8 * d.vmax)
	if len(comps) == 1 {
		c := comps[0]
		mcusX = ((d.width*c.h+d.hmax-1)/d.hmax + 7) / 8
		mcusY = ((d.height*c.v+d.vmax-1)/d.vmax + 7) / 8
	}
	mcu, rstNext := 0, 0
	for my := range mcusY {
		if d.eof {
			return nil
		}
		for mx := range mcusX {
			if d.restart > 0 && mcu > 0 && mcu%d.restart == 0 {
				if err := d.restartMarker(rstNext); err != nil {
					return err
				}
				rstNext = (rstNext + 1) & 7
				d.eobrun = 0
				for _, c := range comps {
					c.pred = 0
				}
			}
			mcu++
			for _, c := range comps {
				bx0, by0, nh, nv := mx*c.h, my*c.v, c.h, c.v
				if len(comps) == 1 {
					bx0, by0, nh, nv = mx, my, 1, 1
				}
				for by := by0; by < by0+nv; by++ {
					for bx := bx0; bx < bx0+nh; bx++ {
						if err := fn(c, bx, by); err != nil {
							return err
						}
					}
				}
			}
		}
	}
	d.skipToMarker()
	return nil
}

func (d *jpegDecoder) restartMarker(n int) error {
	d.bits, d.nbits, d.mark = 0, 0, false
	for d.pos+1 < len(d.data) && !(d.data[d.pos] == 0xFF && d.data[d.pos+1] != 0 && d.data[d.pos+1] != 0xFF) {
		d.pos++
	}
	if d.pos+1 >= len(d.data) || d.data[d.pos+1] != byte(0xD0+n) {
		return errJPEGUnsupported // a missing or out-of-order RSTn: libjpeg resynchronizes its own way
	}
	d.pos += 2
	return nil
}

// fill puts at least 16 bits in the bit buffer (zeros past a marker, as
// libjpeg does).
func (d *jpegDecoder) fill() {
	for d.nbits <= 24 {
		var c byte
		if !d.mark && d.pos < len(d.data) {
			c = d.data[d.pos]
			if c == 0xFF {
				if d.pos+1 < len(d.data) && d.data[d.pos+1] == 0 {
					d.pos += 2
				} else {
					d.mark, c = true, 0
				}
			} else {
				d.pos++
			}
		} else if !d.mark {
			d.mark, d.eof = true, true
		}
		d.bits |= uint32(c) << (24 - d.nbits)
		d.nbits += 8
	}
}

func (d *jpegDecoder) getBits(n int) int32 {
	if n == 0 {
		return 0
	}
	d.fill()
	v := int32(d.bits >> (32 - n))
	d.bits <<= n
	d.nbits -= n
	return v
}

func (d *jpegDecoder) huff(t *huffTable) (int, error) {
	d.fill()
	if e := t.lut[d.bits>>24]; e != 0 {
		n := int(e >> 8)
		d.bits <<= n
		d.nbits -= n
		return int(e & 0xFF), nil
	}
	code := int32(0)
	for l := 1; l <= 16; l++ {
		code = code<<1 | int32(d.bits>>31)
		d.bits <<= 1
		d.nbits--
		if code <= t.maxcode[l] {
			i := t.valptr[l] + code - t.mincode[l]
			if int(i) >= len(t.vals) {
				return 0, errors.New("jpeg: bad Huffman code")
			}
			return int(t.vals[i]), nil
		}
	}
	return 0, errors.New("jpeg: bad Huffman code")
}

// extend is the JPEG sign extension of an s-bit difference.
func extend(v int32, s int) int32 {
	if v < 1<<(s-1) {
		return v - (1 << s) + 1
	}
	return v
}

// block decodes one 8×8 block's coefficients (natural order, not
// dequantized) into coef.
func (d *jpegDecoder) block(c *jpegComponent, coef *[64]int32) error {
	*coef = [64]int32{}
	dc, err := d.dcDiff(c)
	if err != nil {
		return err
	}
	coef[0] = dc
	for k := 1; k < 64; {
		rs, err := d.huff(&d.ac[c.ta])
		if err != nil {
			return err
		}
		r, s := rs>>4, rs&15
		if s == 0 {
			if r != 15 {
				break // end of block
			}
			k += 16
			continue
		}
		k += r
		if k > 63 {
			return errors.New("jpeg: AC coefficient past the block")
		}
		coef[zigzag[k]] = extend(d.getBits(s), s)
		k++
	}
	return nil
}

// scanProgressive decodes one scan of a progressive file into its
// components' coefficients: the DC coefficients (first scan, then one bit
// a refinement scan) of interleaved blocks, or a band ss..se of one
// component's AC coefficients (first scan, then refinement scans adding
// a bit to each nonzero coefficient and new ±1 ones), point-transformed
// by al (ITU T.81 G.1.2).
func (d *jpegDecoder) scanProgressive(comps []*jpegComponent, ss, se, ah, al int) error {
	return d.blocks(comps, func(c *jpegComponent, bx, by int) error {
		i := (by*c.bw + bx) * 64
		blk := c.coefs[i : i+64 : i+64]
		switch {
		case ss == 0 && ah == 0:
			dc, err := d.dcDiff(c)
			blk[0] = dc << al
			return err
		case ss == 0:
			if d.getBits(1) != 0 {
				blk[0] |= 1 << al
			}
			return nil
		case ah == 0:
			return d.acFirst(c, blk, ss, se, al)
		default:
			return d.acRefine(c, blk, ss, se, al)
		}
	})
}

// dcDiff decodes a block's DC difference and returns the component's
// new DC prediction.
func (d *jpegDecoder) dcDiff(c *jpegComponent) (int32, error) {
	s, err := d.huff(&d.dc[c.td])
	if err != nil {
		return 0, err
	}
	if s > 16 {
		return 0, errors.New("jpeg: bad DC difference size")
	}
	if s > 0 {
		c.pred += int(extend(d.getBits(s), s))
	}
	return int32(c.pred), nil
}

func (d *jpegDecoder) acFirst(c *jpegComponent, blk []int32, ss, se, al int) error {
	if d.eobrun > 0 {
		d.eobrun--
		return nil
	}
	for k := ss; k <= se; k++ {
		rs, err := d.huff(&d.ac[c.ta])
		if err != nil {
			return err
		}
		r, s := rs>>4, rs&15
		if s == 0 {
			if r < 15 {
				d.eobrun = 1<<r - 1
				if r > 0 {
					d.eobrun += int(d.getBits(r))
				}
				return nil
			}
			k += 15 // sixteen zeros
			continue
		}
		k += r
		if k > 63 {
			return errors.New("jpeg: AC coefficient past the block")
		}
		blk[zigzag[k]] = extend(d.getBits(s), s) << al
	}
	return nil
}

// refine adds a correction bit to a nonzero coefficient: one more bit of
// its magnitude at p1 (= 1<<al) when the bit is 1 and that bit is not set.
func (d *jpegDecoder) refine(v *int32, p1 int32) {
	if d.getBits(1) != 0 && *v&p1 == 0 {
		if *v >= 0 {
			*v += p1
		} else {
			*v -= p1
		}
	}
}

func (d *jpegDecoder) acRefine(c *jpegComponent, blk []int32, ss, se, al int) error {
	p1 := int32(1) << al
	k := ss
	if d.eobrun == 0 {
		for ; k <= se; k++ {
			rs, err := d.huff(&d.ac[c.ta])
			if err != nil {
				return err
			}
			r, s := rs>>4, rs&15
			var nz int32
			if s != 0 {
				// A newly nonzero coefficient, ±p1 (its size is always 1).
				nz = -p1
				if d.getBits(1) != 0 {
					nz = p1
				}
			} else if r != 15 {
				d.eobrun = 1 << r
				if r > 0 {
					d.eobrun += int(d.getBits(r))
				}
				break // the rest of the block is the end-of-band run's
			}
			// Pass the already nonzero coefficients, refining each, and r
			// zero ones; the new one (if any) takes the zero after them.
			for ; k <= se; k++ {
				z := zigzag[k]
				if blk[z] != 0 {
					d.refine(&blk[z], p1)
				} else {
					if r == 0 {
						break
					}
					r--
				}
			}
			if nz != 0 && k <= se {
				blk[zigzag[k]] = nz
			}
		}
	}
	if d.eobrun > 0 {
		// Inside an end-of-band run: only refinement bits, for the
		// nonzero coefficients left in the band.
		for ; k <= se; k++ {
			if z := zigzag[k]; blk[z] != 0 {
				d.refine(&blk[z], p1)
			}
		}
		d.eobrun--
	}
	return nil
}

// skipToMarker moves past the rest of a scan's entropy-coded data.
func (d *jpegDecoder) skipToMarker() {
	for d.pos+1 < len(d.data) && !(d.data[d.pos] == 0xFF && d.data[d.pos+1] != 0 && (d.data[d.pos+1] < 0xD0 || d.data[d.pos+1] > 0xD7)) {
		d.pos++
	}
}

// finishProgressive runs the inverse DCT of every block once all scans are
// read. (libjpeg smooths the blocks of a progressive file whose low AC
// coefficients are not all complete; a file that ends before its last
// refinement is refused: it would not be decoded alike.)
func (d *jpegDecoder) finishProgressive() (image.Image, error) {
	if d.eof {
		return nil, errors.New("jpeg: the data ends inside a scan (file cut short)")
	}
	for _, c := range d.comps {
		for _, b := range c.bits[1:] {
			if b != 0 {
				// Low AC coefficients not all sent to their last bit:
				// libjpeg smooths the blocks (jdcoefct.c), which this
				// decoder does not.
				return nil, errJPEGUnsupported
			}
		}
	}
	for i := range d.comps {
		c := &d.comps[i]
		stride := c.bw * 8
		for by := range c.bh {
			for bx := range c.bw {
				blk := (*[64]int32)(c.coefs[(by*c.bw+bx)*64:])
				idctIslow(blk, &d.quant[c.tq], c.pix[by*8*stride+bx*8:], stride)
			}
		}
	}
	return d.image()
}

// image assembles the decoded planes.
func (d *jpegDecoder) image() (image.Image, error) {
	r := image.Rect(0, 0, d.width, d.height)
	y := d.comps[0]
	if len(d.comps) == 1 {
		return &image.Gray{Pix: y.pix, Stride: y.bw * 8, Rect: r}, nil
	}
	cb, cr := d.comps[1], d.comps[2]
	if d.rgb {
		m := image.NewRGBA(r)
		for yy := range d.height {
			row := m.Pix[yy*m.Stride:]
			for x := range d.width {
				row[4*x] = y.pix[yy*y.bw*8+x]
				row[4*x+1] = cb.pix[yy*cb.bw*8+x]
				row[4*x+2] = cr.pix[yy*cr.bw*8+x]
				row[4*x+3] = 255
			}
		}
		return m, nil
	}
	ratio := image.YCbCrSubsampleRatio444
	switch {
	case d.hs == 2 && d.vs == 2:
		ratio = image.YCbCrSubsampleRatio420
	case d.hs == 2:
		ratio = image.YCbCrSubsampleRatio422
	}
	return &image.YCbCr{Y: y.pix, Cb: cb.pix, Cr: cr.pix, YStride: y.bw * 8, CStride: cb.bw * 8,
		SubsampleRatio: ratio, Rect: r}, nil
}

// libjpeg's islow constants: FIX(x) = round(x · 2^13).
const (
	idctConstBits  = 13
	idctPass1Bits  = 2
	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_541196100 = 4433
	fix0_765366865 = 6270
	fix0_899976223 = 7373
	fix1_175875602 = 9633
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_562915447 = 20995
	fix3_072711026 = 25172
)

func descale(x int64, n uint) int64 { return (x + 1<<(n-1)) >> n }

// idctIslow is libjpeg's accurate integer inverse DCT (jidctint.c): coef
// in natural order, dequantized by q here, the 8×8 result level-shifted
// and clamped into out (stride bytes a row).
func idctIslow(coef, q *[64]int32, out []byte, stride int) {
	var ws [64]int64
	for col := range 8 {
		if coef[8+col]|coef[16+col]|coef[24+col]|coef[32+col]|coef[40+col]|coef[48+col]|coef[56+col] == 0 {
			dc := int64(coef[col]) * int64(q[col]) << idctPass1Bits
			for r := range 8 {
				ws[r*8+col] = dc
			}
			continue
		}
		o := idct1D(int64(coef[col])*int64(q[col]), int64(coef[8+col])*int64(q[8+col]),
			int64(coef[16+col])*int64(q[16+col]), int64(coef[24+col])*int64(q[24+col]),
			int64(coef[32+col])*int64(q[32+col]), int64(coef[40+col])*int64(q[40+col]),
			int64(coef[48+col])*int64(q[48+col]), int64(coef[56+col])*int64(q[56+col]))
		for r := range 8 {
			ws[r*8+col] = descale(o[r], idctConstBits-idctPass1Bits)
		}
	}
	for row := range 8 {
		w := ws[row*8 : row*8+8 : row*8+8]
		dst := out[row*stride : row*stride+8 : row*stride+8]
		o := idct1D(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
		for c := range 8 {
			v := descale(o[c], idctConstBits+idctPass1Bits+3) + 128
			dst[c] = byte(min(max(v, 0), 255))
		}
	}
}

// idct1D is one pass of the islow transform on one column or row, before
// the final descaling.
func idct1D(i0, i1, i2, i3, i4, i5, i6, i7 int64) [8]int64 {
	// Even part.
	z2, z3 := i2, i6
	z1 := (z2 + z3) * fix0_541196100
	tmp2 := z1 + z3*(-fix1_847759065)
	tmp3 := z1 + z2*fix0_765366865
	tmp0 := (i0 + i4) << idctConstBits
	tmp1 := (i0 - i4) << idctConstBits
	tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
	tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
	// Odd part.
	tmp0, tmp1, tmp2, tmp3 = i7, i5, i3, i1
	z1, z2, z3 = tmp0+tmp3, tmp1+tmp2, tmp0+tmp2
	z4 := tmp1 + tmp3
	z5 := (z3 + z4) * fix1_175875602
	tmp0 *= fix0_298631336
	tmp1 *= fix2_053119869
	tmp2 *= fix3_072711026
	tmp3 *= fix1_501321110
	z1 *= -fix0_899976223
	z2 *= -fix2_562915447
	z3 *= -fix1_961570560
	z4 *= -fix0_390180644
	z3 += z5
	z4 += z5
	tmp0 += z1 + z3
	tmp1 += z2 + z4
	tmp2 += z2 + z3
	tmp3 += z1 + z4
	return [8]int64{tmp10 + tmp3, tmp11 + tmp2, tmp12 + tmp1, tmp13 + tmp0,
		tmp13 - tmp0, tmp12 - tmp1, tmp11 - tmp2, tmp10 - tmp3}
}

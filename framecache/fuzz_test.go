package framecache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"testing"
)

// FuzzReadEntry: no input makes the entry parser or the record reader panic, and no
// record is returned that does not match its checksum.
func FuzzReadEntry(f *testing.F) {
	for _, codec := range []string{"s2", "zstd", "none"} {
		dir := f.TempDir()
		c, _ := openTest(f, Options{Dir: dir, Codec: codec})
		recs := []record{{0, payload("f", 0, 300)}, {0.1, nil}, {0.2, bytes.Repeat([]byte{7}, 500)}}
		put(f, c, "group", "file", 0, 1, []byte("meta"), recs)
		b, err := os.ReadFile(entryFiles(f, dir)[0])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-footerSize])
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(magic + endMagic))
	cs := &codecs{}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkEntry(t, cs, b)
		// Again with the footer's checksum made to match, so that mutations of the
		// header, index and records reach the structure checks and the record reader.
		if fixed := withFooterCRC(b); fixed != nil {
			checkEntry(t, cs, fixed)
		}
	})
}

// withFooterCRC returns a copy of b with the footer checksum recomputed, or nil when b's
// fixed header and footer do not locate a header and an index within it.
func withFooterCRC(b []byte) []byte {
	if len(b) < fixedHeader+footerSize {
		return nil
	}
	_, lens, err := parseFixedHeader(b)
	ft, err2 := parseFooter(b[len(b)-footerSize:])
	if err != nil || err2 != nil {
		return nil
	}
	hlen := uint64(fixedHeader + lens[0] + lens[1] + lens[2])
	idxEnd := uint64(len(b) - footerSize)
	if ft.count > idxEnd/indexEntry || hlen > idxEnd || ft.indexOff > idxEnd || ft.indexOff+ft.count*indexEntry != idxEnd {
		return nil
	}
	out := bytes.Clone(b)
	crc := crc32.Update(0, castagnoli, out[:hlen])
	crc = crc32.Update(crc, castagnoli, out[ft.indexOff:len(out)-8])
	binary.LittleEndian.PutUint32(out[len(out)-8:], crc)
	return out
}

// checkEntry parses b as an entry and reads its records, failing on a returned record
// that does not match its checksum.
func checkEntry(t *testing.T, cs *codecs, b []byte) {
	info, err := readEntry(bytes.NewReader(b), int64(len(b)), nil)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		return
	}
	rs := records{ra: bytes.NewReader(b), info: info, codecs: cs}
	for i := range info.pts {
		pts, p, err := rs.read(i)
		// readInto (NextInto) must agree: the same record, or an ErrCorrupt too.
		ipts, ip, ierr := rs.readInto(i, nil)
		if (err == nil) != (ierr == nil) || err == nil && (ipts != pts || !bytes.Equal(ip, p)) {
			t.Fatalf("record %d: read gave (%v, %d bytes, %v), readInto (%v, %d bytes, %v)", i, pts, len(p), err, ipts, len(ip), ierr)
		}
		if ierr != nil && !errors.Is(ierr, ErrCorrupt) {
			t.Fatalf("record %d: readInto's error %v does not wrap ErrCorrupt", i, ierr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("record %d: error %v does not wrap ErrCorrupt", i, err)
			}
			return
		}
		// Check the record independently of read: its stored header's checksum
		// covers the returned pts and payload.
		h := parseRecordHeader(b[info.off[i]:])
		if pts != h.pts || pts != info.pts[i] || int(h.raw) != len(p) || recordCRC(b[info.off[i]:], p) != h.crc {
			t.Fatalf("record %d returned (pts %v, %d bytes) that fails its checksum", i, pts, len(p))
		}
	}
}

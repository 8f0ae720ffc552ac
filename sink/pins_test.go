package sink

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// thousandFiles is a 1,000-file dataset as a run reads it: the metadata,
// 500 data files and 496 video files of two cameras, each with an S3 ETag
// (an MD5) or a Xet hash (a SHA-256).
func thousandFiles(hash string) []PinnedFile {
	sum := func(s string) string {
		if hash == "xet" {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		}
		h := md5.Sum([]byte(s))
		return hex.EncodeToString(h[:])
	}
	var fs []PinnedFile
	add := func(name string, size int64) { fs = append(fs, PinnedFile{Name: name, Size: size, Hash: sum(name)}) }
	add("meta/info.json", 4_812)
	add("meta/tasks.parquet", 2_301)
	add("meta/episodes/chunk-000/file-000.parquet", 1_204_377)
	add("meta/episodes/chunk-000/file-001.parquet", 904_113)
	for i := range 500 {
		add(fmt.Sprintf("data/chunk-%03d/file-%03d.parquet", i/100, i%100), 104_857_600+int64(i))
	}
	for _, cam := range []string{"observation.images.top", "observation.images.wrist"} {
		for i := range 248 {
			add(fmt.Sprintf("videos/%s/chunk-%03d/file-%03d.mp4", cam, i/100, i%100), 524_288_000+int64(i))
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	return fs
}

// TestHeaderPins: the pins round-trip (grouped by directory on the wire),
// are written only when set, and stay compact: a 1,000-file dataset's
// header grows by about 56 bytes per file with S3 ETags.
func TestHeaderPins(t *testing.T) {
	base, err := AppendHeader(nil, Header{Dataset: "s3://b/p", Revision: strings.Repeat("a", 40)})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(base, []byte("pins")) {
		t.Fatal("pins key written without pins")
	}
	for _, tc := range []struct {
		hash        string
		maxPerFile  int
		wantObjects int64
	}{{"etag", 60, 1_003}, {"xet", 92, 1_000}} {
		t.Run(tc.hash, func(t *testing.T) {
			files := thousandFiles(tc.hash)
			if len(files) != 1000 {
				t.Fatalf("%d files", len(files))
			}
			pins := []DatasetPins{{Dataset: "s3://b/p", Revision: strings.Repeat("a", 40), Hash: tc.hash, Objects: tc.wantObjects, Files: files}}
			b, err := AppendHeader(nil, Header{Dataset: "s3://b/p", Revision: strings.Repeat("a", 40), Pins: pins})
			if err != nil {
				t.Fatal(err)
			}
			grew := len(b) - len(base)
			t.Logf("1,000 files pinned by %s: the header grows by %d bytes (%.1f per file)", tc.hash, grew, float64(grew)/1000)
			if grew > tc.maxPerFile*1000 {
				t.Fatalf("pins of 1,000 files take %d bytes", grew)
			}
			m, err := NewDecoder(bytes.NewReader(b)).Next()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Header.Pins, pins) {
				t.Fatal("pins do not round-trip")
			}
			if bytes.Count(b, []byte("data/chunk-000")) != 1 {
				t.Fatal("a directory written more than once")
			}
			again, _ := AppendHeader(nil, *m.Header)
			if !bytes.Equal(again, b) {
				t.Fatal("a decoded header encodes to other bytes")
			}
		})
	}
}

// TestHeaderPinsMalformed: a pins value that is not the documented shape
// is an error naming it.
func TestHeaderPinsMalformed(t *testing.T) {
	for _, bad := range []string{
		`{"type": "header", "pins": 3}`,
		`{"type": "header", "pins": [3]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": []}]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": {"data": [["f", 1]]}}]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": {"data": [["f", "1", "e"]]}}]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": {"data": [["", 1, "e"]]}}]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": {"": [["x/", 1, "e"]]}}]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": {"../up": [["x", 1, "e"]]}}]}`,
		`{"type": "header", "pins": [{"dataset": "s3://b/p", "files": {"a//b": [["x", 1, "e"]]}}]}`,
	} {
		b := must(appendJSONAsMsgpack(nil, []byte(bad)))
		if _, err := NewDecoder(bytes.NewReader(b)).Next(); err == nil || !strings.Contains(err.Error(), "pins") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// FuzzHeaderPins: any header message decodes without panicking; pins that
// decode re-encode to a header that decodes to the same pins.
func FuzzHeaderPins(f *testing.F) {
	ok, _ := AppendHeader(nil, Header{Dataset: "s3://b/p", Pins: []DatasetPins{{Dataset: "s3://b/p", Hash: "etag", Objects: 2,
		Files: []PinnedFile{{Name: "meta/info.json", Size: 3, Hash: "e"}, {Name: "top", Size: 0, Hash: "f"}}}}})
	f.Add(ok)
	f.Add(must(appendJSONAsMsgpack(nil, []byte(`{"type": "header", "pins": [{"files": {"a/b": [["c", 1, "e"]]}}]}`))))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := NewDecoder(bytes.NewReader(b)).Next()
		if err != nil || m.Header == nil || len(m.Header.Pins) == 0 {
			return
		}
		again, err := AppendHeader(nil, Header{Pins: m.Header.Pins})
		if err != nil {
			t.Fatal(err)
		}
		m2, err := NewDecoder(bytes.NewReader(again)).Next()
		if err != nil || !reflect.DeepEqual(m2.Header.Pins, m.Header.Pins) {
			t.Fatalf("pins %+v re-decode as %+v (%v)", m.Header.Pins, m2.Header.Pins, err)
		}
	})
}

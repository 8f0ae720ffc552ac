package sink

import (
	"bytes"
	"reflect"
	"testing"
)

// TestHeaderCameras: a decoded camera's kind, dtype, shape and (depth)
// unit round-trip; an undecoded one stays {key, decoded} on the wire.
func TestHeaderCameras(t *testing.T) {
	cams := []Camera{
		{Key: "rgb", Decoded: true, Kind: "rgb", DType: "|u1", Shape: []int{3, 4, 6}},
		{Key: "depth", Decoded: true, Kind: "depth", DType: "<f4", Shape: []int{1, 4, 6}, Unit: "mm"},
		{Key: "gone", Decoded: false, Reason: "video files absent", Kind: "rgb"},
	}
	b, err := AppendHeader(nil, Header{Dataset: "d", Cameras: cams})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewDecoder(bytes.NewReader(b)).Next()
	if err != nil {
		t.Fatal(err)
	}
	want := []Camera{cams[0], cams[1], {Key: "gone"}}
	if !reflect.DeepEqual(m.Header.Cameras, want) {
		t.Fatalf("cameras %+v, want %+v", m.Header.Cameras, want)
	}
	if bytes.Contains(b, []byte("video files absent")) {
		t.Fatal("reason on the wire")
	}
}

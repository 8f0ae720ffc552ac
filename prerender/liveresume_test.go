package prerender

import (
	"encoding/base64"
	"testing"
)

// TestParseLiveToken: live stream tokens parse; replay tokens, damaged or
// out-of-range ones do not.
func TestParseLiveToken(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		tok string
		ok  bool
	}{
		{enc(`{"v":1,"e":1,"b":3,"f":"2DvTtyUg_tSe"}`), true},
		{enc(`{"v":1,"e":0,"b":0,"f":""}`), true},
		{enc(`{"v":2,"e":0,"b":0,"f":"x"}`), false},
		{enc(`{"v":1,"e":-1,"b":0,"f":"x"}`), false},
		{enc(`{"v":1,"e":0,"b":-2,"f":"x"}`), false},
		{replayTokenPrefix + enc(`{"v":1}`), false},
		{"not base64!", false},
		{"", false},
	} {
		if _, err := parseLiveToken(tc.tok); (err == nil) != tc.ok || IsLiveToken(tc.tok) != tc.ok {
			t.Errorf("parseLiveToken(%q) = %v, want ok %t", tc.tok, err, tc.ok)
		}
	}
}

// FuzzLiveToken: parsing any string never panics, and what parses is in
// range.
func FuzzLiveToken(f *testing.F) {
	f.Add("eyJ2IjoxLCJlIjoxLCJiIjozLCJmIjoiMkR2VHR5VWdfdFNlIn0")
	f.Add(replayTokenPrefix + "e30")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := parseLiveToken(s)
		if err == nil && (tok.Version != 1 || tok.Epoch < 0 || tok.Batch < 0) {
			t.Fatalf("%q parsed out of range: %+v", s, tok)
		}
	})
}

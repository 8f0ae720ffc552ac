package validate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lrstream/lrstream/internal/tamper"
)

// TestDepthFeatures: depth features are checked (parameters, channels,
// pixel format), every camera stream would leave out or refuse is
// reported with the reason, and a good depth feature is clean.
func TestDepthFeatures(t *testing.T) {
	good := map[string]any{"is_depth_map": true, "video.pix_fmt": "gray12le", "video.depth_min": 0.01,
		"video.depth_max": 10.0, "video.shift": 3.5, "video.use_log": true}
	with := func(kv ...any) map[string]any {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	cases := []struct {
		name     string
		info     map[string]any
		channels int
		sev      Severity
		want     string // "" : no camera finding
	}{
		{"good", good, 1, Error, ""},
		{"min not below max", with("video.depth_min", 10.0), 1, Error, "is not below video.depth_max"},
		{"log min+shift", with("video.shift", -1.0), 1, Error, "must be positive"},
		{"missing max", with("video.depth_max", nil), 1, Warning, "without video.depth_max"},
		{"8-bit", with("video.pix_fmt", "yuv420p"), 1, Error, "pixel format yuv420p"},
		{"av1", with("video.codec", "av1"), 1, Warning, "LeRobotDataset 0.6.1 refuses"},
		{"three channels", good, 3, Error, "has 3 channels, want 1"},
		{"not depth, 1 channel", map[string]any{"is_depth_map": false}, 1, Error, "not a depth map"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tamper.CopyDataset(conformance(t, "pub_jsonext_front_wrist"), dir); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "meta/info.json")
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var info map[string]any
			if err := json.Unmarshal(raw, &info); err != nil {
				t.Fatal(err)
			}
			f := info["features"].(map[string]any)["observation.images.wrist"].(map[string]any)
			f["info"] = c.info
			f["shape"] = []int{48, 64, c.channels}
			f["names"] = []string{"height", "width", "channels"}
			out, _ := json.Marshal(info)
			if err := os.WriteFile(p, out, 0o644); err != nil {
				t.Fatal(err)
			}
			rep := runDir(t, dir, Options{})
			found := false
			for _, fd := range rep.Findings {
				if fd.Column == "observation.images.wrist" && fd.File == "meta/info.json" {
					found = true
					if c.want == "" {
						t.Errorf("finding on a good depth feature: %v", fd)
					}
				}
			}
			if c.want != "" && !has(rep, c.sev, CheckVideo, "observation.images.wrist", c.want) {
				t.Fatalf("want %v %q:%s", c.sev, c.want, dump(rep))
			}
			if c.want == "" && found {
				t.Fatal(dump(rep))
			}
		})
	}
}

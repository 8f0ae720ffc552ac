package video

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindFFmpeg: LRSTREAM_FFMPEG picks the ffmpeg executable (a path or
// a name on PATH), with the ffprobe beside it, else the one on PATH; a
// name that does not resolve is ErrNoFFmpeg naming the variable.
func TestFindFFmpeg(t *testing.T) {
	d := needFFmpeg(t)
	pathProbe, err := exec.LookPath("ffprobe")
	if err != nil {
		t.Fatal(err)
	}
	alone, pair := t.TempDir(), t.TempDir()
	link := func(dir, name, to string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	aloneFF := link(alone, "ffmpeg", d.Path)
	pairFF, pairProbe := link(pair, "ffmpeg", d.Path), link(pair, "ffprobe", d.Probe)
	for _, tc := range []struct {
		name, env           string
		wantPath, wantProbe string
		wantErr             string
	}{
		{name: "unset: PATH", env: "", wantPath: d.Path, wantProbe: d.Probe},
		{name: "a name on PATH", env: "ffmpeg", wantPath: d.Path, wantProbe: d.Probe},
		{name: "a path, ffprobe on PATH", env: aloneFF, wantPath: aloneFF, wantProbe: pathProbe},
		{name: "a path with its ffprobe", env: pairFF, wantPath: pairFF, wantProbe: pairProbe},
		{name: "missing", env: filepath.Join(alone, "no-such-ffmpeg"), wantErr: FFmpegEnv + "=" + filepath.Join(alone, "no-such-ffmpeg")},
		{name: "a directory", env: alone, wantErr: FFmpegEnv + "=" + alone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(FFmpegEnv, tc.env)
			got, err := NewFFmpeg()
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNoFFmpeg) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want ErrNoFFmpeg naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Path != tc.wantPath || got.Probe != tc.wantProbe {
				t.Fatalf("ffmpeg %q, ffprobe %q; want %q, %q", got.Path, got.Probe, tc.wantPath, tc.wantProbe)
			}
		})
	}
}

// TestFFmpegBuildsSameFrames decodes the same files with two FFmpeg builds
// — the one on PATH and LRSTREAM_ALT_FFMPEG (scripts/test.sh: the
// statically linked FFmpeg 9 that imageio-ffmpeg bundles, against
// Debian's 5.1) — and checks that every frame has the same timestamp and
// bytes: as decoded (YUV 4:2:0, which lrstream converts), as RGB24 from
// FFmpeg, resized (FFmpeg's scaler), from the start and after a seek.
// That is what docs/video.md, "Which FFmpeg", promises of a faster
// build; the frame cache still keeps each build's frames apart.
func TestFFmpegBuildsSameFrames(t *testing.T) {
	d := needFFmpeg(t)
	alt := os.Getenv("LRSTREAM_ALT_FFMPEG")
	if alt == "" {
		if os.Getenv("LRSTREAM_REQUIRE_ALT_FFMPEG") != "" {
			t.Fatal("LRSTREAM_REQUIRE_ALT_FFMPEG is set but LRSTREAM_ALT_FFMPEG is not")
		}
		t.Skip("LRSTREAM_ALT_FFMPEG (a second FFmpeg build) is not set: scripts/test.sh sets it")
	}
	other, err := findFFmpeg(alt)
	if err != nil {
		t.Fatal(err)
	}
	idA, errA := d.Identity(t.Context())
	idB, errB := other.Identity(t.Context())
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if idA == idB {
		t.Fatalf("LRSTREAM_ALT_FFMPEG is the same build as the ffmpeg on PATH:\n%s", idA)
	}
	t.Logf("builds:\n%s\n--\n%s", firstLine([]byte(idA)), firstLine([]byte(idB)))
	dir := t.TempDir()
	for _, codec := range []string{"libsvtav1", "libx264"} {
		p := makeVideo(t, dir, codec+".mp4", codec, 160, 120, 30, 75, 12)
		for _, tc := range []struct {
			name string
			rgb  bool
			seg  Segment
		}{
			{"yuv", false, Segment{Path: p, End: 10}},
			{"yuv after a seek", false, Segment{Path: p, Start: 31.0 / 30, End: 10}},
			{"rgb24", true, Segment{Path: p, End: 10}},
			{"resized", false, Segment{Path: p, Start: 17.0 / 30, End: 10, Width: 64, Height: 48}},
		} {
			// Fresh decoders: no process or probe shared.
			a, errA := findFFmpeg(d.Path)
			b, errB := findFFmpeg(other.Path)
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			a.RGB24, b.RGB24 = tc.rgb, tc.rgb
			want := decodeAll(t, a, tc.seg, 0)
			got := decodeAll(t, b, tc.seg, 0)
			if len(want) == 0 {
				t.Fatalf("%s %s: no frames", codec, tc.name)
			}
			sameFrames(t, codec+" "+tc.name, got, want)
		}
	}
}

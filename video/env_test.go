package video

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestChildEnv(t *testing.T) {
	in := []string{
		"PATH=/usr/bin", "HOME=/root", "LANG=C.UTF-8", "TMPDIR=/tmp", "AWS_REGION=us-east-1",
		"HF_TOKEN=hf_x", "HUGGING_FACE_HUB_TOKEN=hf_y", "HF_TOKEN_PATH=/root/.cache/huggingface/token",
		"AWS_ACCESS_KEY_ID=AKIA", "AWS_SECRET_ACCESS_KEY=s", "AWS_SESSION_TOKEN=t", "AWS_PROFILE=prod",
		"GITHUB_TOKEN=g", "my_api_key=k", "DB_PASSWORD=p", "CLIENT_SECRET=c", "GOOGLE_APPLICATION_CREDENTIALS=/k.json",
		"LRSTREAM_S3_SECRET_KEY=x", "=C:=weird",
	}
	got := ChildEnv(in)
	want := []string{"PATH=/usr/bin", "HOME=/root", "LANG=C.UTF-8", "TMPDIR=/tmp", "AWS_REGION=us-east-1"}
	if !slices.Equal(got, want) {
		t.Fatalf("ChildEnv = %q, want %q", got, want)
	}
	for _, c := range []struct {
		name   string
		secret bool
	}{{"HF_TOKEN", true}, {"hf_token", true}, {"AWS_SECRET_ACCESS_KEY", true}, {"PATH", false}, {"FFREPORT", false}, {"XDG_RUNTIME_DIR", false}} {
		if IsSecretEnv(c.name) != c.secret {
			t.Errorf("IsSecretEnv(%q) = %v, want %v", c.name, !c.secret, c.secret)
		}
	}
}

// TestFFmpegEnvStripped starts a fake ffmpeg/ffprobe (a shell script that
// dumps its environment) through every path lrstream uses to run them and
// checks no credential reached it.
func TestFFmpegEnvStripped(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell script fake")
	}
	dir := t.TempDir()
	dump := filepath.Join(dir, "env")
	fake := filepath.Join(dir, "ffmpeg")
	script := "#!/bin/sh\nenv >> \"$LRSTREAM_TEST_ENV_DUMP\"\necho '--' >> \"$LRSTREAM_TEST_ENV_DUMP\"\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LRSTREAM_TEST_ENV_DUMP", dump)
	secrets := map[string]string{"HF_TOKEN": "hf_secret_1", "HUGGING_FACE_HUB_TOKEN": "hf_secret_2",
		"AWS_SECRET_ACCESS_KEY": "aws_secret_3", "AWS_SESSION_TOKEN": "aws_secret_4", "SOME_PASSWORD": "pw_secret_5"}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	video := filepath.Join(dir, "x.mp4")
	if err := os.WriteFile(video, []byte("not a video"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &FFmpeg{Path: fake, Probe: fake}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d.probe(ctx, video)                                                                                                // ffprobe
	d.matches(ctx, yuvKey{w: 2, h: 2}, yuvFor("bt470bg", "tv"))                                                        // ffmpeg, colour check
	_ = d.Decode(ctx, Segment{Path: video, Start: 0, End: 0.1, Width: 2, Height: 2}, func(Frame) error { return nil }) // ffmpeg, frames
	d.Close()
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the fake ffmpeg did not run: %v", err)
	}
	if runs := strings.Count(string(b), "--\n"); runs < 3 {
		t.Fatalf("the fake ffmpeg ran %d times, want 3 (probe, colour check, decode): %s", runs, b)
	}
	for k, v := range secrets {
		if strings.Contains(string(b), v) {
			t.Errorf("%s reached ffmpeg's environment", k)
		}
	}
	if !strings.Contains(string(b), "PATH=") {
		t.Errorf("PATH was stripped too: %s", b)
	}
}

package video

import (
	"context"
	"os"
	"os/exec"

	"github.com/lrstream/lrstream/internal/procenv"
)

// FFmpeg and ffprobe read local files and pipes only: they need no
// credential, so they are started with an environment stripped of every
// variable that may carry one (HF_TOKEN for the Hub, AWS_* keys for object
// stores, anything named like a token, secret, password or key). A child
// process's environment can be read by other processes of the same user
// (/proc/PID/environ) and ends up in core dumps and crash reports.

// IsSecretEnv reports whether the environment variable name may carry a
// credential and is therefore not passed to FFmpeg or ffprobe
// (procenv.IsSecret).
func IsSecretEnv(name string) bool { return procenv.IsSecret(name) }

// ChildEnv returns environ without the variables IsSecretEnv names: the
// environment of every FFmpeg and ffprobe process lrstream starts
// (procenv.Child).
func ChildEnv(environ []string) []string { return procenv.Child(environ) }

// Command is exec.CommandContext with ChildEnv(os.Environ()) as the
// environment: use it for every FFmpeg and ffprobe process.
func Command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = ChildEnv(os.Environ())
	return cmd
}

// command is Command for a process that outlives any one context (a kept
// decoder, stopped by lrstream itself).
func command(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Env = ChildEnv(os.Environ())
	return cmd
}

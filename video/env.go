package video

import (
	"context"
	"os"
	"os/exec"
	"strings"
)

// FFmpeg and ffprobe read local files and pipes only: they need no
// credential, so they are started with an environment stripped of every
// variable that may carry one (HF_TOKEN for the Hub, AWS_* keys for object
// stores, anything named like a token, secret, password or key). A child
// process's environment can be read by other processes of the same user
// (/proc/PID/environ) and ends up in core dumps and crash reports.

// secretWords mark a variable name (upper-cased) as a credential.
var secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY",
	"ACCESS_KEY", "PRIVATE_KEY", "SESSION_KEY", "AUTH"}

// secretNames are credentials whose names carry none of secretWords.
var secretNames = map[string]bool{
	"AWS_ACCESS_KEY_ID": true, "AWS_WEB_IDENTITY_TOKEN_FILE": true, "AWS_PROFILE": true,
	"AWS_SHARED_CREDENTIALS_FILE": true, "AWS_CONFIG_FILE": true, "HF_TOKEN_PATH": true,
	"GOOGLE_APPLICATION_CREDENTIALS": true, "AZURE_STORAGE_KEY": true, "AZURE_STORAGE_CONNECTION_STRING": true,
}

// IsSecretEnv reports whether the environment variable name may carry a
// credential and is therefore not passed to FFmpeg or ffprobe.
func IsSecretEnv(name string) bool {
	u := strings.ToUpper(name)
	if secretNames[u] {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// ChildEnv returns environ (KEY=VALUE entries, as os.Environ gives them)
// without the variables IsSecretEnv names. It is the environment of every
// FFmpeg and ffprobe process lrstream starts.
func ChildEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || IsSecretEnv(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

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

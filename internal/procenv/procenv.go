// Package procenv builds the environment of the external programs lrstream
// starts (FFmpeg, ffprobe): the parent's environment stripped of every
// variable that may carry a credential. It has no dependencies, so every
// package that starts a process can use it.
package procenv

import "strings"

// secretWords mark a variable name (upper-cased) as a credential.
var secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "API_KEY", "APIKEY",
	"ACCESS_KEY", "PRIVATE_KEY", "SESSION_KEY", "AUTH"}

// secretNames are credentials whose names carry none of secretWords.
var secretNames = map[string]bool{
	"AWS_ACCESS_KEY_ID": true, "AWS_WEB_IDENTITY_TOKEN_FILE": true, "AWS_PROFILE": true,
	"AWS_SHARED_CREDENTIALS_FILE": true, "AWS_CONFIG_FILE": true, "HF_TOKEN_PATH": true,
	"GOOGLE_APPLICATION_CREDENTIALS": true, "AZURE_STORAGE_KEY": true, "AZURE_STORAGE_CONNECTION_STRING": true,
}

// IsSecret reports whether the environment variable name may carry a
// credential and is therefore not passed to FFmpeg or ffprobe.
func IsSecret(name string) bool {
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

// Child returns environ (KEY=VALUE entries, as os.Environ gives them)
// without the variables IsSecret names. It is the environment of every
// FFmpeg and ffprobe process lrstream starts.
func Child(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || IsSecret(name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

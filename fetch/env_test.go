package fetch

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHubOptionsFromEnvMatchesHuggingFaceHub pins the token, cache and
// offline rules to huggingface_hub 1.x (constants.py, utils/_auth.py,
// utils/_headers.py). Each row was checked against huggingface_hub 1.33
// (get_token(), build_hf_headers(), constants.HF_HUB_CACHE,
// constants.HF_HUB_OFFLINE) in the project venv.
func TestHubOptionsFromEnvMatchesHuggingFaceHub(t *testing.T) {
	home := t.TempDir()
	hf := filepath.Join(home, "hf")
	if err := os.MkdirAll(hf, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(home, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("hf/token", " hf_file\r\n")
	crlf := write("crlf", "hf_a\r\nb\n")
	blank := write("blank", " \n\t")
	cases := []struct {
		name    string
		env     map[string]string
		token   string
		cache   string
		offline bool
	}{
		{"file under HF_HOME, CR/LF and spaces stripped", map[string]string{"HF_HOME": hf}, "hf_file", filepath.Join(hf, "hub"), false},
		{"HF_TOKEN wins over the file", map[string]string{"HF_HOME": hf, "HF_TOKEN": "  hf_env\n"}, "hf_env", filepath.Join(hf, "hub"), false},
		{"legacy HUGGING_FACE_HUB_TOKEN when HF_TOKEN is unset", map[string]string{"HF_HOME": hf, "HUGGING_FACE_HUB_TOKEN": "hf_legacy"}, "hf_legacy", filepath.Join(hf, "hub"), false},
		{"HF_TOKEN beats the legacy name", map[string]string{"HF_HOME": hf, "HF_TOKEN": "hf_new", "HUGGING_FACE_HUB_TOKEN": "hf_legacy"}, "hf_new", filepath.Join(hf, "hub"), false},
		// HF_TOKEN set to blanks is chosen over the legacy name, cleans to
		// nothing, and the file is used.
		{"blank HF_TOKEN falls to the file, not the legacy name", map[string]string{"HF_HOME": hf, "HF_TOKEN": " \n", "HUGGING_FACE_HUB_TOKEN": "hf_legacy"}, "hf_file", filepath.Join(hf, "hub"), false},
		{"CR/LF inside a token are removed", map[string]string{"HF_HOME": hf, "HF_TOKEN_PATH": crlf}, "hf_ab", filepath.Join(hf, "hub"), false},
		{"blank token file means no token", map[string]string{"HF_HOME": hf, "HF_TOKEN_PATH": blank}, "", filepath.Join(hf, "hub"), false},
		{"missing token file means no token", map[string]string{"HF_HOME": hf, "HF_TOKEN_PATH": filepath.Join(home, "nope")}, "", filepath.Join(hf, "hub"), false},
		{"HF_HUB_DISABLE_IMPLICIT_TOKEN drops the file token", map[string]string{"HF_HOME": hf, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}, "", filepath.Join(hf, "hub"), false},
		{"HF_HUB_DISABLE_IMPLICIT_TOKEN drops HF_TOKEN too", map[string]string{"HF_HOME": hf, "HF_TOKEN": "hf_env", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "True"}, "", filepath.Join(hf, "hub"), false},
		{"HF_HUB_DISABLE_IMPLICIT_TOKEN=0 keeps it", map[string]string{"HF_HOME": hf, "HF_TOKEN": "hf_env", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "0"}, "hf_env", filepath.Join(hf, "hub"), false},
		{"HF_TOKEN_PATH with ~ and $VAR", map[string]string{"HF_HOME": hf, "SUB": "hf", "HF_TOKEN_PATH": "~/$SUB/token"}, "hf_file", filepath.Join(hf, "hub"), false},
		{"HF_HOME with ${VAR}", map[string]string{"ROOT": home, "HF_HOME": "${ROOT}/hf"}, "hf_file", filepath.Join(hf, "hub"), false},
		{"unset $VAR stays as written", map[string]string{"HF_HOME": hf, "HF_HUB_CACHE": "/c/$NOPE/x"}, "hf_file", "/c/$NOPE/x", false},
		{"XDG_CACHE_HOME", map[string]string{"XDG_CACHE_HOME": "/x"}, "", "/x/huggingface/hub", false},
		{"legacy HUGGINGFACE_HUB_CACHE", map[string]string{"HF_HOME": hf, "HUGGINGFACE_HUB_CACHE": "/legacy"}, "hf_file", "/legacy", false},
		{"HF_HUB_CACHE beats the legacy name", map[string]string{"HF_HOME": hf, "HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HUB_CACHE": "/new"}, "hf_file", "/new", false},
		{"HF_HUB_OFFLINE=yes", map[string]string{"HF_HOME": hf, "HF_HUB_OFFLINE": "yes"}, "hf_file", filepath.Join(hf, "hub"), true},
		{"HF_HUB_OFFLINE with spaces is false", map[string]string{"HF_HOME": hf, "HF_HUB_OFFLINE": " 1"}, "hf_file", filepath.Join(hf, "hub"), false},
		{"TRANSFORMERS_OFFLINE when HF_HUB_OFFLINE is unset", map[string]string{"HF_HOME": hf, "TRANSFORMERS_OFFLINE": "1"}, "hf_file", filepath.Join(hf, "hub"), true},
		{"HF_HUB_OFFLINE=0 overrides TRANSFORMERS_OFFLINE", map[string]string{"HF_HOME": hf, "HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"}, "hf_file", filepath.Join(hf, "hub"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{"HOME": home}
			for k, v := range c.env {
				env[k] = v
			}
			o, err := HubOptionsFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if o.Token != c.token || o.CacheDir != c.cache || o.Offline != c.offline {
				t.Errorf("token %q cache %q offline %v; want %q %q %v", o.Token, o.CacheDir, o.Offline, c.token, c.cache, c.offline)
			}
		})
	}
	// An unreadable token file is an error that does not print its content.
	if _, err := HubOptionsFromEnv(func(k string) string {
		return map[string]string{"HOME": home, "HF_HOME": hf, "HF_TOKEN_PATH": hf}[k] // a directory
	}); err == nil {
		t.Error("a token path that is a directory was accepted")
	}
}

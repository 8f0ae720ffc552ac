package s3

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/s3test"
)

// sharedEnv writes the shared files (skipped when "") into a private home
// and returns the environment of a client reading them.
func sharedEnv(t *testing.T, config, creds string, kv ...string) map[string]string {
	t.Helper()
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".aws"), 0o700)
	if config != "" {
		os.WriteFile(filepath.Join(home, ".aws", "config"), []byte(config), 0o600)
	}
	if creds != "" {
		os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte(creds), 0o600)
	}
	env := map[string]string{"HOME": home}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// TestProfileStyle: the nested "s3 = addressing_style = …" of the profile
// (AWS_PROFILE, else default) is read from ~/.aws/config (or
// AWS_CONFIG_FILE) and ~/.aws/credentials as the AWS CLI reads them;
// LRSTREAM_S3_ADDRESSING_STYLE overrides it.
func TestProfileStyle(t *testing.T) {
	nested := func(section, style string) string {
		return "[" + section + "]\nregion = eu-west-1\ns3 =\n    max_concurrent_requests = 20\n    addressing_style = " + style + "\n"
	}
	cases := []struct {
		name          string
		config, creds string
		env           []string
		want, err     string
	}{
		{"no files", "", "", nil, "", ""},
		{"default profile", nested("default", "path"), "", nil, StylePath, ""},
		{"profile default section", nested("profile default", "virtual"), "", nil, StyleVirtual, ""},
		{"named profile", nested("default", "path") + nested("profile dev", "virtual"), "", []string{"AWS_PROFILE", "dev"}, StyleVirtual, ""},
		{"profile with extra spaces", nested("profile   dev", "path"), "", []string{"AWS_PROFILE", "dev"}, StylePath, ""},
		{"a section without the profile prefix is no profile", nested("dev", "path"), "", []string{"AWS_PROFILE", "dev"}, "", ""},
		{"other profile unset", nested("profile other", "path"), "", nil, "", ""},
		{"upper-case value and key", "[default]\nS3 =\n  addressing_style = Virtual\n", "", nil, StyleVirtual, ""},
		{"tab-indented, no spaces", "[default]\ns3 =\n\taddressing_style=path\n", "", nil, StylePath, ""},
		{"comment lines", "# mine\n[default]\n; old\ns3 =\n  addressing_style = path\n", "", nil, StylePath, ""},
		{"s3 without addressing_style", "[default]\ns3 =\n  use_accelerate_endpoint = true\n", "", nil, "", ""},
		{"the later section wins", nested("default", "path") + nested("profile default", "virtual"), "", nil, StyleVirtual, ""},
		{"credentials file merged over config", nested("profile dev", "path"), nested("dev", "virtual"), []string{"AWS_PROFILE", "dev"}, StyleVirtual, ""},
		{"credentials file alone", "", nested("default", "path"), nil, StylePath, ""},
		{"environment overrides", nested("default", "path"), "", []string{"LRSTREAM_S3_ADDRESSING_STYLE", "virtual"}, StyleVirtual, ""},
		{"AWS_CONFIG_FILE", "", "", []string{"AWS_CONFIG_FILE", "CONF"}, StyleVirtual, ""},
		{"bad value", nested("default", "dns"), "", nil, "", `s3 addressing_style "dns"`},
		{"not nested", "[default]\ns3 = path\n", "", nil, "", "not a nested section"},
		{"nested line without =", "[default]\ns3 =\n  addressing_style path\n", "", nil, "", "not key = value"},
		{"not INI", "[default\naws_secret_access_key = SECRET\n", "", nil, "", "not an INI file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := sharedEnv(t, c.config, c.creds, c.env...)
			if env["AWS_CONFIG_FILE"] == "CONF" {
				p := filepath.Join(t.TempDir(), "elsewhere")
				os.WriteFile(p, []byte(nested("default", "virtual")), 0o600)
				env["AWS_CONFIG_FILE"] = p
			}
			o, err := OptionsFromEnv(func(k string) string { return env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "SECRET") {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || o.AddressingStyle != c.want {
				t.Fatalf("style %q (%v), want %q", o.AddressingStyle, err, c.want)
			}
		})
	}
}

// TestProfileStyleRequests: the style a profile sets is the one the
// server sees. versitygw runs with --virtual-domain localhost behind a
// recording proxy; the client reaches BUCKET.localhost through a dialer
// to the proxy. Virtual-hosted requests carry the bucket in Host, path
// ones in the path; both read the file.
func TestProfileStyleRequests(t *testing.T) {
	srv := s3test.StartVirtual(t, "localhost")
	srv.CreateBucket("lrstream-test")
	srv.PutDir("lrstream-test", "sets/ds", conformance)
	for _, c := range []struct {
		name, config string
		env          []string
		virtual      bool
	}{
		{"profile virtual", "[profile lr]\ns3 =\n  addressing_style = virtual\n", []string{"AWS_PROFILE", "lr"}, true},
		{"profile path", "[default]\ns3 =\n  addressing_style = path\n", nil, false},
		{"auto: path for a custom endpoint", "[default]\ns3 =\n  addressing_style = auto\n", nil, false},
		{"environment over profile", "[default]\ns3 =\n  addressing_style = path\n", []string{"LRSTREAM_S3_ADDRESSING_STYLE", "virtual"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			proxy := s3test.NewProxy(t, srv.Endpoint)
			addr := strings.TrimPrefix(proxy.URL, "http://")
			_, port, _ := net.SplitHostPort(addr)
			env := sharedEnv(t, c.config, "", c.env...)
			for k, v := range srv.Env() {
				env[k] = v
			}
			env["AWS_ENDPOINT_URL"] = "http://localhost:" + port
			o, err := OptionsFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			o.CacheDir = t.TempDir()
			o.Transport = &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr) // BUCKET.localhost without DNS
			}}
			src, err := Open(context.Background(), spec, o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fetch.ReadAll(context.Background(), src, "meta/info.json")
			if err != nil || string(got) != string(localBytes(t, "meta/info.json")) {
				t.Fatalf("read: %v", err)
			}
			seen := proxy.HostLog()
			if len(seen) < 2 {
				t.Fatalf("the server saw %v", seen)
			}
			for _, r := range seen {
				host, p, _ := strings.Cut(r, " ")
				virtual := host == "lrstream-test.localhost:"+port && !strings.HasPrefix(p, "/lrstream-test")
				path := host == "localhost:"+port && strings.HasPrefix(p, "/lrstream-test")
				if virtual != c.virtual || path == c.virtual {
					t.Fatalf("request %q: want virtual-hosted %v (all requests: %v)", r, c.virtual, seen)
				}
			}
		})
	}
}

// FuzzParseNested: a nested value parses to trimmed keys without "=" and
// trimmed values, or fails; it never panics.
func FuzzParseNested(f *testing.F) {
	for _, s := range []string{"\n  addressing_style = path", "\n\ta=b\n\n c = d = e", "path", "", "\nno equals", "\n=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, err := parseNested(v)
		if err != nil {
			return
		}
		for k, val := range m {
			if strings.Contains(k, "=") || strings.TrimSpace(k) != k || strings.TrimSpace(val) != val || strings.Contains(k, "\n") {
				t.Fatalf("%q: key %q value %q", v, k, val)
			}
		}
	})
}

// FuzzProfileStyle: any config file gives a valid style or an error that
// quotes none of the file's lines (they may hold keys) — only a bad
// addressing_style value is quoted; nothing panics.
func FuzzProfileStyle(f *testing.F) {
	for _, s := range []string{"[default]\ns3 =\n  addressing_style = path\n", "[profile p]\ns3 =\n\taddressing_style=virtual\n",
		"[default\naws_secret_access_key = SECRETVALUE\n", "[default]\ns3 =\n  nokey SECRETVALUE\n", "[default]\ns3 = SECRETVALUE\n"} {
		f.Add(s, "default")
		f.Add(s, "p")
	}
	f.Fuzz(func(t *testing.T, file, profile string) {
		p := filepath.Join(t.TempDir(), "config")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		style, err := profileStyle(p, "", profile)
		if err != nil {
			quoted := strings.Contains(err.Error(), "SECRETVALUE") && !strings.Contains(profile, "SECRETVALUE")
			if quoted && !strings.Contains(err.Error(), "s3 addressing_style") {
				t.Fatalf("the error quotes the file: %v", err)
			}
			return
		}
		switch style {
		case "", StyleAuto, StylePath, StyleVirtual:
		default:
			t.Fatalf("style %q", style)
		}
	})
}

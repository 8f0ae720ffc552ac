package s3

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/internal/s3test"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		in, bucket, prefix string
		ok                 bool
	}{
		{"s3://my-bucket/sets/ds", "my-bucket", "sets/ds", true},
		{"s3://my-bucket/sets/ds/", "my-bucket", "sets/ds", true},
		{"s3://my-bucket", "my-bucket", "", true},
		{"s3://my-bucket/", "my-bucket", "", true},
		{"s3://my_bucket.v2/x", "my_bucket.v2", "x", true},
		{"s3://My-Bucket/x", "", "", false},
		{"s3://ab/x", "", "", false},
		{"s3://-bucket/x", "", "", false},
		{"s3://bucket/../x", "", "", false},
		{"s3://bucket/a//b", "", "", false},
		{"s3://bucket/a/./b", "", "", false},
		{"s3://bucket/a\\b", "", "", false},
		{"s3://bucket/a\nb", "", "", false},
		{"s3://bu..cket/a", "", "", false},
		{"gs://bucket/a", "", "", false},
		{"bucket/a", "", "", false},
	}
	for _, c := range cases {
		b, p, err := ParseURL(c.in)
		if (err == nil) != c.ok || b != c.bucket || p != c.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q, ok=%v", c.in, b, p, err, c.bucket, c.prefix, c.ok)
		}
	}
}

// FuzzParseURL: an accepted URL round-trips, and its prefix joined to the
// cache never leaves it.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bucket/a/b", "s3://bucket", "s3://b.c-d_e/x/y/", "s3://bucket/../x", "s3://bucket/a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, p, err := ParseURL(s)
		if err != nil {
			return
		}
		if got := URL(b, p); got != strings.TrimSuffix(s, "/") {
			t.Fatalf("round trip %q -> %q", s, got)
		}
		root := "/cache/root"
		if j := filepath.Join(root, b, filepath.FromSlash(p)); !strings.HasPrefix(j, root+"/") {
			t.Fatalf("%q escapes: %s", s, j)
		}
	})
}

func TestOptionsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name string
		env  map[string]string
		want Options
		err  string
	}{
		{"s3 endpoint wins", map[string]string{"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://b:2/", "HOME": "/h"},
			Options{Endpoint: "http://b:2", CacheDir: "/h/.cache/lrstream/s3"}, ""},
		{"ignored endpoints", map[string]string{"AWS_ENDPOINT_URL": "http://a:1", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true", "HOME": "/h"},
			Options{CacheDir: "/h/.cache/lrstream/s3"}, ""},
		{"region fallback, profile, anonymous, style, offline", map[string]string{"AWS_DEFAULT_REGION": "eu-west-1", "AWS_PROFILE": "p",
			"AWS_NO_SIGN_REQUEST": "YES", "LRSTREAM_S3_ADDRESSING_STYLE": "Virtual", "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": "/x",
			"AWS_EC2_METADATA_DISABLED": "TRUE"},
			Options{Region: "eu-west-1", Profile: "p", Anonymous: true, AddressingStyle: "virtual", Offline: true, CacheDir: "/x/lrstream/s3", NoIMDS: true}, ""},
		{"bad style", map[string]string{"LRSTREAM_S3_ADDRESSING_STYLE": "dns", "HOME": "/h"}, Options{}, "addressing style"},
		{"endpoint with credentials", map[string]string{"AWS_ENDPOINT_URL": "http://u:p@a:1", "HOME": "/h"}, Options{}, "without credentials"},
		{"endpoint not http", map[string]string{"AWS_ENDPOINT_URL": "ftp://a", "HOME": "/h"}, Options{}, "want http"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := OptionsFromEnv(env(c.env))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "u:p@") {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Endpoint != c.want.Endpoint || o.Region != c.want.Region || o.Profile != c.want.Profile || o.Anonymous != c.want.Anonymous ||
				o.AddressingStyle != c.want.AddressingStyle || o.Offline != c.want.Offline || o.CacheDir != c.want.CacheDir || o.NoIMDS != c.want.NoIMDS {
				t.Fatalf("got %+v, want %+v", o, c.want)
			}
		})
	}
}

func TestAddressingAndFolders(t *testing.T) {
	for _, c := range []struct {
		endpoint, style string
		path            bool
		folder          string
	}{
		{"", "", false, "aws"},
		{"", StylePath, true, "aws"},
		{"http://127.0.0.1:9000", "", true, "http-127.0.0.1_9000"},
		{"https://x.r2.cloudflarestorage.com", StyleVirtual, false, "https-x.r2.cloudflarestorage.com"},
		{"https://h/../../etc", "", true, "https-h_.._.._etc"},
	} {
		o := Options{Endpoint: c.endpoint, AddressingStyle: c.style}
		if o.pathStyle() != c.path || o.storeFolder() != c.folder {
			t.Errorf("%+v: path %v folder %q", o, o.pathStyle(), o.storeFolder())
		}
	}
}

// TestRangeReadsOnly: with CacheNone a shard is read with range requests:
// a footer read costs its tail, a read in the middle its bytes, nothing
// reaches the blob cache; metadata is cached.
func TestRangeReadsOnly(t *testing.T) {
	srv, files := serve(t)
	ctx := context.Background()
	px := s3test.NewProxy(t, srv.Endpoint)
	o := testOpts(t, px.URL)
	o.Cache = fetch.CacheNone
	o.Range.FooterSize = 4096
	src, err := Open(ctx, spec, o)
	if err != nil {
		t.Fatal(err)
	}
	name := bigShard(t, files)
	size := files[name]
	if size < 3*4096 {
		t.Fatalf("%s is too small for this test (%d bytes)", name, size)
	}
	f, err := src.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := px.Bytes()
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, size-8); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 100), size-200); err != nil {
		t.Fatal(err)
	}
	if got := px.Bytes() - before; got != 4096 {
		t.Fatalf("footer reads moved %d bytes, want the 4096-byte tail once", got)
	}
	before = px.Bytes()
	if _, err := f.ReadAt(make([]byte, 1000), size/3); err != nil {
		t.Fatal(err)
	}
	if got := px.Bytes() - before; got != 1000 {
		t.Fatalf("a 1000-byte read moved %d bytes", got)
	}
	blobs, _ := os.ReadDir(filepath.Join(src.CacheDir(), "blobs"))
	for _, b := range blobs {
		if strings.HasSuffix(b.Name(), ".parquet") {
			t.Fatalf("CacheNone wrote a shard to the cache: %s", b.Name())
		}
	}
}

// TestProfileFromSharedFiles: credentials, region and endpoint_url of a
// named profile in the shared files reach the server.
func TestProfileFromSharedFiles(t *testing.T) {
	srv, _ := serve(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n[lr]\naws_access_key_id = "+s3test.AccessKey+"\naws_secret_access_key = "+s3test.SecretKey+"\n"), 0o600)
	os.WriteFile(conf, []byte("[profile lr]\nregion = "+s3test.Region+"\nendpoint_url = "+srv.Endpoint+"\n"), 0o600)
	o, err := OptionsFromEnv(func(k string) string {
		return map[string]string{"AWS_PROFILE": "lr", "AWS_CONFIG_FILE": conf, "AWS_SHARED_CREDENTIALS_FILE": creds, "HOME": dir}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	src, err := Open(context.Background(), spec, o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src.CacheDir(), "127.0.0.1") {
		t.Fatalf("the profile's endpoint did not reach the cache folder: %s", src.CacheDir())
	}
	if _, err := fetch.ReadAll(context.Background(), src, "meta/info.json"); err != nil {
		t.Fatal(err)
	}
}

// TestNoRedirects: a store answering with a redirect to another host is
// not followed — the signed request never reaches it — and the error says
// why.
func TestNoRedirects(t *testing.T) {
	var other atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer elsewhere.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
		}))
		o := testOpts(t, store.URL)
		_, err := Open(context.Background(), spec, o)
		store.Close()
		if err == nil || strings.Contains(err.Error(), s3test.SecretKey) || !strings.Contains(err.Error(), "redirects are not followed") {
			t.Fatalf("%d: opened through a redirect, leaked the secret or gave no hint: %v", status, err)
		}
		t.Logf("%d: %v", status, err)
	}
	if n := other.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}

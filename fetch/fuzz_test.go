package fetch

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The Hub's answers and headers are untrusted input: these targets check
// the parsers never panic and keep their promises (round trips, paths that
// stay inside the cache, bounded waits). Seeds are realistic Hub answers.

func FuzzParseTreePage(f *testing.F) {
	for _, s := range []struct{ body, dir string }{
		{`[{"type":"directory","oid":"4b825dc642cb6eb9a060e54bf8d69288fbee4904","size":0,"path":"data"},` +
			`{"type":"file","oid":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391","size":1234,"path":"README.md"},` +
			`{"type":"file","oid":"83d2e4a1f2a0c9b6e6b2f3a4c5d6e7f8091a2b3c","size":104857600,` +
			`"lfs":{"oid":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":104857600,"pointerSize":134},` +
			`"xetHash":"abc","path":"data/chunk-000/file-000.parquet"}]`, ""},
		{`[{"type":"file","oid":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391","size":10,"path":"meta/info.json"}]`, "meta"},
		{`[{"type":"file","oid":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391","size":10,"path":"../etc/passwd"}]`, ""},
		{`[{"type":"file","oid":"zz","size":10,"path":"a"}]`, ""},
		{`[{"type":"file","oid":"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391","size":-1,"path":"a"}]`, ""},
		{`[{"type":"submodule","path":"x"}]`, ""},
		{`{}`, ""}, {`[]`, "data"}, {`null`, ""},
	} {
		f.Add([]byte(s.body), s.dir)
	}
	cache := filepath.Join(f.TempDir(), "snapshots", "sha")
	f.Fuzz(func(t *testing.T, body []byte, dir string) {
		entries, err := parseTreePage(body, dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if ValidateRemotePath(e.Path) != nil {
				t.Fatalf("unsafe path %q accepted", e.Path)
			}
			if dir != "" && !strings.HasPrefix(e.Path, dir+"/") {
				t.Fatalf("path %q outside %q accepted", e.Path, dir)
			}
			if p, err := inside(cache, e.Path); err != nil || !strings.HasPrefix(p, cache+string(filepath.Separator)) {
				t.Fatalf("accepted path %q escapes the snapshot: %q, %v", e.Path, p, err)
			}
			switch e.Type {
			case "file":
				if !hexRE.MatchString(e.blobHash()) || e.size() < 0 {
					t.Fatalf("file entry %+v accepted", e)
				}
				if strings.ContainsAny(e.blobHash(), "/\\.") {
					t.Fatalf("blob name %q could leave blobs/", e.blobHash())
				}
			case "directory":
			default:
				t.Fatalf("entry type %q kept", e.Type)
			}
		}
		// Re-encoding what was accepted parses to the same entries.
		again, err := json.Marshal(entries)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseTreePage(again, dir)
		if err != nil || len(back) != len(entries) {
			t.Fatalf("re-encoded page: %d entries, %v; want %d", len(back), err, len(entries))
		}
	})
}

func FuzzParseRevisionInfo(f *testing.F) {
	f.Add([]byte(`{"_id":"6540","id":"lerobot/aloha_sim","sha":"0123456789abcdef0123456789abcdef01234567","private":false,"siblings":[{"rfilename":"meta/info.json"}]}`))
	f.Add([]byte(`{"sha":"0123456789ABCDEF0123456789abcdef01234567"}`))
	f.Add([]byte(`{"sha":"../../etc"}`))
	f.Add([]byte(`{"sha":12}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		sha, err := parseRevisionInfo(body)
		if err != nil {
			return
		}
		if !shaRE.MatchString(sha) {
			t.Fatalf("commit %q accepted", sha)
		}
		b, _ := json.Marshal(map[string]string{"sha": sha})
		if back, err := parseRevisionInfo(b); err != nil || back != sha {
			t.Fatalf("round trip %q -> %q, %v", sha, back, err)
		}
	})
}

func FuzzNextLink(f *testing.F) {
	for _, s := range []string{
		`<https://huggingface.co/api/datasets/org/name/tree/main?recursive=true&cursor=ZXlKbWFXeGw>; rel="next"`,
		`<https://huggingface.co/api/x?cursor=a>; rel="prev", <https://huggingface.co/api/x?cursor=b>; rel="next"`,
		`<https://a/b>; rel="first next"`, `<https://a/b>; REL=next`, `<no-end; rel="next"`, `garbage`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		u := nextLink(v)
		if u == "" {
			return
		}
		if !strings.Contains(v, "<"+u+">") || strings.Contains(u, ">") {
			t.Fatalf("nextLink(%q) = %q: not one <...> target of the header", v, u)
		}
		// The target survives being re-served as a single next link.
		if u2 := nextLink("<" + u + `>; rel="next"`); u2 != u && !strings.Contains(u, ",") {
			t.Fatalf("re-served link %q parsed as %q", u, u2)
		}
	})
}

func FuzzParseContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/1000", "bytes 900-999/1000", "bytes 0-0/*", "bytes */1000",
		"bytes 5-4/10", "bytes 0-10/10", "bytes +1-2/3", "bytes -1-2/3", "bytes 0-9223372036854775807/*", " bytes 1-2/3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		start, end, total, ok := parseContentRange(v)
		if !ok {
			return
		}
		if start < 0 || end < start || total < -1 || (total >= 0 && end >= total) {
			t.Fatalf("parseContentRange(%q) = %d, %d, %d", v, start, end, total)
		}
		tot := "*"
		if total >= 0 {
			tot = strconv.FormatInt(total, 10)
		}
		canon := fmt.Sprintf("bytes %d-%d/%s", start, end, tot)
		s2, e2, t2, ok2 := parseContentRange(canon)
		if !ok2 || s2 != start || e2 != end || t2 != total {
			t.Fatalf("round trip of %q via %q failed", v, canon)
		}
	})
}

func FuzzServerWait(f *testing.F) {
	for _, s := range []struct{ ra, rl string }{
		{"120", ""}, {"1.5", ""}, {"Wed, 21 Oct 2026 07:28:00 GMT", ""}, {"", `"api";r=0;t=55`},
		{"", `"resolvers";r=10;t=120`}, {"3", `"api";r=0;t=300`}, {"1e300", ""}, {"+Inf", ""}, {"NaN", ""},
		{"-5", ""}, {"", `"api";r=0;t=99999999999999999`}, {"", "t=5"},
	} {
		f.Add(s.ra, s.rl)
	}
	now := time.Date(2026, 10, 21, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, rl string) {
		h := http.Header{}
		if ra != "" {
			h.Set("Retry-After", ra)
		}
		if rl != "" {
			h.Set("RateLimit", rl)
		}
		d := serverWait(h, now)
		if d < 0 || d > maxServerWait {
			t.Fatalf("serverWait(Retry-After %q, RateLimit %q) = %v", ra, rl, d)
		}
		// Each header alone never asks for more than both together.
		if w := rateLimitWait(h.Get("RateLimit")); w < 0 || w > d {
			t.Fatalf("RateLimit %q alone waits %v, both %v", rl, w, d)
		}
		// Whole seconds round trip.
		if n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && n >= 0 && n < 1e6 && rl == "" {
			if d != time.Duration(n)*time.Second {
				t.Fatalf("Retry-After %q = %v", ra, d)
			}
		}
	})
}

func FuzzParseRepoSpec(f *testing.F) {
	for _, s := range []string{"lerobot/aloha_sim", "lerobot/aloha_sim@main", "hf://datasets/org/name@v1.0",
		"datasets/org/name@refs/pr/3", "org/name@0123456789abcdef0123456789abcdef01234567", "org/name@../../x",
		"org/name@a/./b", "../x", "org/name/extra", "org--x/y", "org/name@", "org/name@x.lock", "org/name@{1}"} {
		f.Add(s)
	}
	refs := filepath.Join(f.TempDir(), "refs")
	f.Fuzz(func(t *testing.T, spec string) {
		id, rev, err := ParseRepoSpec(spec)
		if err != nil {
			return
		}
		if strings.Count(id, "/") != 1 || rev == "" || strings.Contains(id, "..") || strings.Contains(id, "--") {
			t.Fatalf("ParseRepoSpec(%q) = %q, %q", spec, id, rev)
		}
		// The cache folder and refs/<rev> stay inside the cache.
		if strings.ContainsAny(RepoFolderName(id), `/\`) {
			t.Fatalf("cache folder %q of %q has a separator", RepoFolderName(id), id)
		}
		if p, err := inside(refs, rev); err != nil || !strings.HasPrefix(p, refs+string(filepath.Separator)) {
			t.Fatalf("revision %q of %q: refs path %q, %v", rev, spec, p, err)
		}
		// Round trip.
		id2, rev2, err := ParseRepoSpec(id + "@" + rev)
		if err != nil || id2 != id || rev2 != rev {
			t.Fatalf("round trip of %q: %q, %q, %v", spec, id2, rev2, err)
		}
	})
}

// FuzzTimeoutEnv: HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT values
// parse to the default or a whole number of seconds within bounds, or to
// an error naming the variable; never a negative or zero timeout.
func FuzzTimeoutEnv(f *testing.F) {
	for _, s := range []string{"", "0", "10", " 7 ", "1_0", "+3", "-3", "1.5", "ten", "_1", "1__0", "9999999999999999999999", "1048577"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := parseTimeoutEnv("HF_HUB_ETAG_TIMEOUT", v, DefaultETagTimeout)
		if err != nil {
			if !strings.Contains(err.Error(), "HF_HUB_ETAG_TIMEOUT") {
				t.Fatalf("%q: error %q does not name the variable", v, err)
			}
			return
		}
		if d < time.Second || d > (1<<20)*time.Second || d%time.Second != 0 {
			t.Fatalf("%q: timeout %v", v, d)
		}
	})
}

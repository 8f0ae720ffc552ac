package fakehub

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// serveControl answers the fake's own routes (under /_fake/, no token),
// with which a test in another process (the Python interop suite, through
// cmd/fakebuckets) drives it:
//
//	POST /_fake/bucket?id=NS/NAME               create an empty bucket
//	POST /_fake/put?id=NS/NAME&path=P           store the body as file P
//	POST /_fake/putdir?id=NS/NAME&prefix=P&dir=D  store a local directory's files under P
//	POST /_fake/fault?kind=K&n=N&status=S       add a fault
//	POST /_fake/xorb-delay?ms=N                 delay every xorb upload
//	GET  /_fake/log, /_fake/counts, /_fake/batches, /_fake/refusals, /_fake/shards (base64)  what was requested, refused, accepted
func (b *Buckets) serveControl(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch strings.TrimPrefix(r.URL.Path, "/_fake/") {
	case "bucket":
		b.AddBucket(q.Get("id"))
	case "put":
		data, err := io.ReadAll(r.Body)
		if err == nil {
			err = b.Put(q.Get("id"), q.Get("path"), data)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
	case "putdir":
		if err := b.PutDir(q.Get("id"), q.Get("prefix"), q.Get("dir")); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
	case "fault":
		n, _ := strconv.Atoi(q.Get("n"))
		st, _ := strconv.Atoi(q.Get("status"))
		b.AddFault(&Fault{Kind: q.Get("kind"), N: n, Status: st})
	case "xorb-delay":
		ms, _ := strconv.Atoi(q.Get("ms"))
		b.Mu.Lock()
		b.XorbDelay = time.Duration(ms) * time.Millisecond
		b.Mu.Unlock()
	case "log":
		b.Mu.Lock()
		out := append([]Request{}, b.Log...)
		b.Mu.Unlock()
		writeJSON(w, 200, out)
		return
	case "counts":
		b.Mu.Lock()
		out := map[string]int{}
		for k, v := range b.Counts {
			out[k] = v
		}
		b.Mu.Unlock()
		writeJSON(w, 200, out)
		return
	case "batches":
		writeJSON(w, 200, b.BatchLog())
		return
	case "shards":
		b.Mu.Lock()
		out := append([][]byte{}, b.Shards...)
		b.Mu.Unlock()
		writeJSON(w, 200, out) // base64
		return
	case "refusals":
		b.Mu.Lock()
		out := append([]string{}, b.Refusals...)
		b.Mu.Unlock()
		writeJSON(w, 200, out)
		return
	default:
		http.Error(w, "no control route "+r.URL.Path, 404)
		return
	}
	writeJSON(w, 200, map[string]bool{"ok": true})
}

// PutDir stores every file under dir as prefix/RELPATH of bucket id.
func (b *Buckets) PutDir(id, prefix, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := filepath.ToSlash(rel)
		if prefix = strings.Trim(prefix, "/"); prefix != "" {
			name = prefix + "/" + name
		}
		return b.Put(id, name, data)
	})
}

// MarshalJSON names a logged request's fields as the Python suite reads
// them.
func (r Request) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"host": r.Host, "method": r.Method, "path": r.Path, "auth": r.Auth})
}

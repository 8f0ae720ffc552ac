// Command fakebuckets serves the test suite's fake Storage Buckets and Xet
// CAS (internal/fakehub.Buckets) on loopback for tests in another process:
// the Python interop suite (python/interop/test_buckets.py) drives the
// same fake as the Go tests, through its /_fake/ control routes.
//
//	fakebuckets [-token T] [-page-size N] [-bucket NS/NAME]... [-put NS/NAME/PREFIX=DIR]...
//
// It prints one JSON line ({"endpoint", "cdn", "cas"}) and serves until its
// standard input closes or it is signaled.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lrstream/lrstream/internal/fakehub"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var buckets, puts list
	token := flag.String("token", "", "require `TOKEN` (Authorization: Bearer) on the Hub routes")
	page := flag.Int("page-size", 50, "tree entries per page")
	flag.Var(&buckets, "bucket", "create the empty bucket `NS/NAME` (repeatable)")
	flag.Var(&puts, "put", "store the files of DIR under a bucket prefix: `NS/NAME[/PREFIX]=DIR` (repeatable)")
	flag.Parse()
	b := fakehub.NewBucketsServer()
	defer b.Close()
	b.Token, b.PageSize = *token, *page
	for _, id := range buckets {
		b.AddBucket(id)
	}
	for _, p := range puts {
		spec, dir, ok := strings.Cut(p, "=")
		parts := strings.SplitN(spec, "/", 3)
		if !ok || len(parts) < 2 {
			fmt.Fprintf(os.Stderr, "fakebuckets: -put %q: want NS/NAME[/PREFIX]=DIR\n", p)
			os.Exit(2)
		}
		prefix := ""
		if len(parts) == 3 {
			prefix = parts[2]
		}
		if err := b.PutDir(parts[0]+"/"+parts[1], prefix, dir); err != nil {
			fmt.Fprintf(os.Stderr, "fakebuckets: -put %q: %v\n", p, err)
			os.Exit(1)
		}
	}
	json.NewEncoder(os.Stdout).Encode(map[string]string{"endpoint": b.URL(), "cdn": b.CDN.URL, "cas": b.CAS.URL})
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
}

package s3test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what the proxy does to a request instead of passing it on.
type Fault int

const (
	// Pass forwards the request.
	Pass Fault = iota
	// SlowDown answers 503 with S3's SlowDown error, without forwarding.
	SlowDown
	// Cut forwards, then drops the connection after half the body.
	Cut
	// Stall forwards, sends half the body, then sends nothing until the
	// client gives up.
	Stall
)

// Proxy is an HTTP proxy in front of a Server that counts what it serves
// (requests, body bytes per object path) and injects faults. The Host
// header is kept, so SigV4 signatures made for the proxy's address verify.
type Proxy struct {
	URL    string
	target *url.URL
	rt     http.RoundTripper

	requests atomic.Int64
	bytes    atomic.Int64

	mu     sync.Mutex
	faults []Fault // consumed one per GET/HEAD/PUT request
	match  string  // only paths containing this get faults ("" = all)
	byPath map[string]int64
	spans  map[string][]Span
	log    []string // "METHOD PATH" of every request, in order
	hosts  []string // "HOST PATH" of every request, in order
	delay  time.Duration
}

// SetDelay makes every request wait d before it is forwarded (a slow
// store, so that a test can act while a stream is in progress).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Span is a byte range of an object served by the proxy.
type Span struct{ Off, Len int64 }

// NewProxy starts a proxy to target (http://HOST:PORT); it is closed when
// the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: u, rt: http.DefaultTransport.(*http.Transport).Clone(), byPath: map[string]int64{}, spans: map[string][]Span{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Inject makes the next n requests (whose path contains match, when match
// is not "") fail with f.
func (p *Proxy) Inject(f Fault, n int, match string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = match
	for range n {
		p.faults = append(p.faults, f)
	}
}

// Pending is the number of faults not yet used.
func (p *Proxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.faults)
}

// Requests is the number of requests received.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Bytes is the number of response body bytes served.
func (p *Proxy) Bytes() int64 { return p.bytes.Load() }

// BytesOf returns the body bytes served per request path (/BUCKET/KEY).
func (p *Proxy) BytesOf() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.byPath))
	for k, v := range p.byPath {
		out[k] = v
	}
	return out
}

// Spans returns the byte ranges served per request path since the last
// Reset.
func (p *Proxy) Spans() map[string][]Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string][]Span, len(p.spans))
	for k, v := range p.spans {
		out[k] = append([]Span(nil), v...)
	}
	return out
}

// Log returns "METHOD PATH" of every request received, in order.
func (p *Proxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// HostLog returns "HOST PATH" of every request so far, in order (the
// Host header as the client sent and signed it: BUCKET.DOMAIN:PORT for a
// virtual-hosted request, DOMAIN:PORT with /BUCKET/… for a path-style one).
func (p *Proxy) HostLog() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.hosts...)
}

// Reset forgets the bytes and spans served so far.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byPath, p.spans = map[string]int64{}, map[string][]Span{}
	p.bytes.Store(0)
}

// account records n body bytes of the response to r.
func (p *Proxy) account(r *http.Request, resp *http.Response, n int64) {
	p.bytes.Add(n)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byPath[r.URL.Path] += n
	if r.Method == http.MethodGet && n > 0 {
		var off int64
		if cr := resp.Header.Get("Content-Range"); cr != "" {
			fmt.Sscanf(cr, "bytes %d-", &off)
		}
		p.spans[r.URL.Path] = append(p.spans[r.URL.Path], Span{Off: off, Len: n})
	}
}

func (p *Proxy) next(path string) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.faults) == 0 || (p.match != "" && !strings.Contains(path, p.match)) {
		return Pass
	}
	f := p.faults[0]
	p.faults = p.faults[1:]
	return f
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.mu.Lock()
	p.log = append(p.log, r.Method+" "+r.URL.Path)
	p.hosts = append(p.hosts, r.Host+" "+r.URL.Path)
	delay := p.delay
	p.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
	fault := p.next(r.URL.Path)
	if fault == SlowDown {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host // the signed host
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	var body io.Reader = resp.Body
	half := resp.ContentLength / 2
	if (fault == Cut || fault == Stall) && half > 0 {
		body = io.LimitReader(resp.Body, half)
	}
	// The bytes are counted before they are sent: a client that has read
	// a response always finds it counted (counting after the copy raced
	// with the client's next step).
	want := resp.ContentLength
	if want >= 0 && (fault == Cut || fault == Stall) && half > 0 {
		want = half
	}
	if want >= 0 {
		p.account(r, resp, want)
	}
	n, _ := io.Copy(w, body)
	switch {
	case want < 0:
		p.account(r, resp, n)
	case n < want:
		p.bytes.Add(n - want) // a body cut short by the client
		p.mu.Lock()
		p.byPath[r.URL.Path] += n - want
		p.mu.Unlock()
	}
	switch {
	case fault == Cut && half > 0:
		panic(http.ErrAbortHandler) // drops the connection
	case fault == Stall && half > 0:
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		panic(http.ErrAbortHandler)
	}
}

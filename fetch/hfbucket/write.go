package hfbucket

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
	"github.com/lrstream/lrstream/fetch/xet"
)

// PublishStats says what Publish did.
type PublishStats struct {
	Uploaded, Skipped int
	Bytes             int64
}

// writer writes files into a bucket prefix: the Hub's bucket API (CAS
// tokens, the batch API) with the HF token, the bytes through a Xet upload
// session with the CAS token.
type writer struct {
	*Store
	cas *xet.CAS
}

func newWriter(spec string, hub fetch.HubOptions) (*writer, error) {
	id, prefix, ep, err := parseSpec(spec, &hub)
	if err != nil {
		return nil, err
	}
	if hub.Offline {
		return nil, fmt.Errorf("%s: cannot write a bucket offline (HF_HUB_OFFLINE is set)", spec)
	}
	log := hub.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Store{id: id, prefix: prefix, endpoint: ep, token: hub.Token, log: log, direct: map[string]*url.URL{}}
	s.client = s.newClient(hub)
	// The bucket API is never redirected: no redirect is followed with the token.
	s.client.HTTPClient.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w := &writer{Store: s}
	pol := hub.Retry.WithDefaults()
	w.cas = xet.NewCAS(w.casToken, xet.RetryPolicy{MaxAttempts: pol.MaxAttempts, MinBackoff: pol.MinBackoff, MaxBackoff: pol.MaxBackoff},
		hub.Transport, log)
	return w, nil
}

// casToken asks the Hub for a CAS write token of the bucket.
func (w *writer) casToken(ctx context.Context) (xet.Token, error) {
	req, err := w.newRequest(ctx, "/api/buckets/"+escapeID(w.id)+"/xet-write-token", "")
	if err != nil {
		return xet.Token{}, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return xet.Token{}, w.httpError("xet-write-token", req.URL, nil, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return xet.Token{}, w.httpError("xet-write-token", req.URL, resp, nil)
	}
	var body struct {
		CASURL      string `json:"casUrl"`
		AccessToken string `json:"accessToken"`
		Exp         int64  `json:"exp"`
	}
	json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body)
	if body.CASURL == "" { // the same in headers
		body.CASURL, body.AccessToken = resp.Header.Get("X-Xet-Cas-Url"), resp.Header.Get("X-Xet-Access-Token")
		body.Exp, _ = strconv.ParseInt(resp.Header.Get("X-Xet-Token-Expiration"), 10, 64)
	}
	if body.CASURL == "" || body.AccessToken == "" || body.Exp == 0 {
		return xet.Token{}, fmt.Errorf("%s: the Hub's xet-write-token answer has no CAS URL, token or expiry", w.ID())
	}
	return xet.Token{CASURL: body.CASURL, AccessToken: body.AccessToken, Expires: time.Unix(body.Exp, 0)}, nil
}

// batchOp is one line of the bucket batch API.
type batchOp struct {
	Type        string `json:"type"`
	Path        string `json:"path"`
	XetHash     string `json:"xetHash,omitempty"`
	MTime       int64  `json:"mtime,omitempty"`
	ContentType string `json:"contentType,omitempty"`
}

// batch applies operations with the bucket batch API. Failed operations
// (a "failed" list in a 200 or a 422) come back as an error naming them.
func (w *writer) batch(ctx context.Context, ops []batchOp) error {
	if len(ops) == 0 {
		return nil
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, op := range ops {
		enc.Encode(op)
	}
	req, err := w.newRequest(ctx, "/api/buckets/"+escapeID(w.id)+"/batch", "")
	if err != nil {
		return err
	}
	req.Method = http.MethodPost
	req.Header.Set("Content-Type", "application/x-ndjson")
	if err := req.SetBody(body.Bytes()); err != nil {
		return err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return w.httpError("batch", req.URL, nil, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnprocessableEntity {
		var r struct {
			Failed []struct{ Path, Error string } `json:"failed"`
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err := json.Unmarshal(data, &r); err == nil && len(r.Failed) > 0 {
			var msgs []string
			for i, f := range r.Failed {
				if i == 5 {
					msgs = append(msgs, fmt.Sprintf("and %d more", len(r.Failed)-5))
					break
				}
				msgs = append(msgs, fmt.Sprintf("%s: %s", f.Path, f.Error))
			}
			return fmt.Errorf("%s: the bucket refused %d of %d operations: %s", w.ID(), len(r.Failed), len(ops), strings.Join(msgs, "; "))
		}
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return w.httpError("batch", req.URL, resp, nil)
}

// Publish uploads the files names (relative to dir, slash-separated) to the
// bucket prefix spec (hf://buckets/NS/NAME/PREFIX/NAME each) through a Xet
// upload, with the same guarantees as s3.Publish: the files of last (the
// index of a pre-render) are registered after every other file, in a batch
// of their own, so a reader that lists them finds every file they name; a
// remote last file that differs from the local one is deleted before
// anything is uploaded, so a reader never pairs an old index with new
// files. A file the bucket already has with the same Xet hash (computed
// locally first) is skipped: running the same publish again finishes an
// interrupted one.
func Publish(ctx context.Context, spec, dir string, names, last []string, hub fetch.HubOptions) (PublishStats, error) {
	var st PublishStats
	w, err := newWriter(spec, hub)
	if err != nil {
		return st, err
	}
	remote, err := w.List(ctx)
	if err != nil {
		return st, w.scrubErr(err)
	}
	local := map[string]string{}
	for _, n := range names {
		if err := objstore.ValidKey(n); err != nil {
			return st, fmt.Errorf("publish %q: %w", n, err)
		}
		h, err := hashFile(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return st, fmt.Errorf("publish: %w", err)
		}
		local[n] = h
	}
	var stale []batchOp
	for _, n := range last {
		if p, ok := remote[n]; ok && p.ETag != local[n] {
			stale = append(stale, batchOp{Type: "deleteFile", Path: w.Key(n)})
		}
	}
	if err := w.batch(ctx, stale); err != nil {
		return st, w.scrubErr(fmt.Errorf("deleting the stale index: %w", err))
	}
	var first []string
	for _, n := range names {
		if !slices.Contains(last, n) {
			first = append(first, n)
		}
	}
	for _, group := range [][]string{first, last} {
		for len(group) > 0 {
			n := min(len(group), batchSize)
			if err := w.publishGroup(ctx, dir, group[:n], local, remote, &st); err != nil {
				return st, w.scrubErr(err)
			}
			group = group[n:]
		}
	}
	return st, nil
}

// batchSize is the number of files uploaded and registered together, as
// huggingface_hub sends them (_BUCKET_BATCH_ADD_CHUNK_SIZE).
const batchSize = 1000

// publishGroup uploads the files of group the bucket does not have, then
// registers them in one batch.
func (w *writer) publishGroup(ctx context.Context, dir string, group []string, local map[string]string, remote map[string]objstore.Pin, st *PublishStats) error {
	sess := xet.NewSession(w.cas)
	var ops []batchOp
	for _, n := range group {
		if p, ok := remote[n]; ok && p.ETag == local[n] {
			st.Skipped++
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(n))
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		info, err := f.Stat()
		if err == nil {
			var up xet.File
			up, err = sess.Upload(ctx, n, f)
			if err == nil && up.Hash.String() != local[n] {
				err = fmt.Errorf("%s changed while it was published", p)
			}
			st.Bytes += up.Size
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("publish %s: %w", n, err)
		}
		ops = append(ops, batchOp{Type: "addFile", Path: w.Key(n), XetHash: local[n], MTime: info.ModTime().UnixMilli(),
			ContentType: mime.TypeByExtension(path.Ext(n))})
		st.Uploaded++
	}
	if err := sess.Commit(ctx); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return w.batch(ctx, ops)
}

// hashFile is a local file's Xet hash.
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h, _, _, err := xet.HashReader(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return h.String(), nil
}

// scrubErr removes the HF token from an error's text.
func (w *writer) scrubErr(err error) error {
	if err == nil || w.token == "" || !strings.Contains(err.Error(), w.token) {
		return err
	}
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), w.token, "[token]"))
}

// CheckWrite fails when spec cannot be written with hub's token (a CAS
// write token is refused, the bucket does not exist): prerender asks before
// it renders anything.
func CheckWrite(ctx context.Context, spec string, hub fetch.HubOptions) error {
	w, err := newWriter(spec, hub)
	if err != nil {
		return err
	}
	_, err = w.casToken(ctx)
	return w.scrubErr(err)
}

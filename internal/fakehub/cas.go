package fakehub

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/lrstream/lrstream/fetch/xet"
)

// serveBatch applies NDJSON bucket operations: addFile registers a Xet hash
// known to the CAS (from an uploaded shard) under a path, deleteFile
// removes a path. Failures are listed ({"path", "error"}) in a 200, or a
// 422 when every operation failed.
func (b *Buckets) serveBatch(w http.ResponseWriter, r *http.Request, id string) {
	sc := bufio.NewScanner(io.LimitReader(r.Body, 64<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	type failure struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	}
	failed := []failure{}
	n := 0
	var paths []string
	b.Mu.Lock()
	defer b.Mu.Unlock()
	defer func() { b.Batches = append(b.Batches, paths) }()
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		n++
		var op struct {
			Type, Path, XetHash, ContentType string
			MTime                            *int64
		}
		if err := json.Unmarshal([]byte(line), &op); err != nil {
			hubError(w, 400, "BadRequest", fmt.Sprintf("line %d: %v", n, err))
			return
		}
		switch op.Type {
		case "addFile":
			paths = append(paths, "+"+op.Path)
			if msg := b.addFile(id, op.Path, op.XetHash, op.MTime); msg != "" {
				failed = append(failed, failure{op.Path, msg})
			}
		case "deleteFile":
			paths = append(paths, "-"+op.Path)
			if b.buckets[id][op.Path] == nil {
				failed = append(failed, failure{op.Path, "file not found"})
			}
			delete(b.buckets[id], op.Path)
		default:
			failed = append(failed, failure{op.Path, "unknown operation type " + op.Type})
		}
	}
	status := http.StatusOK
	if n > 0 && len(failed) == n {
		status = http.StatusUnprocessableEntity
	}
	writeJSON(w, status, map[string]any{"success": len(failed) == 0, "failed": failed})
}

// addFile registers path → xetHash; the reason it cannot, else "".
func (b *Buckets) addFile(id, path, xetHash string, mtime *int64) string {
	if path == "" || strings.HasPrefix(path, "/") || strings.Contains(path, "//") {
		return "invalid path"
	}
	h, err := xet.ParseHash(xetHash)
	if err != nil {
		return "invalid xetHash"
	}
	var size int64
	if h != (xet.Hash{}) {
		fi := b.files[h]
		if fi == nil {
			return "xetHash " + xetHash + " is not in the CAS (upload its shard first)"
		}
		size = int64(fi.Size())
	}
	if mtime == nil {
		return "missing mtime"
	}
	b.buckets[id][path] = &BucketFile{Path: path, XetHash: h.String(), Size: size, MTime: *mtime}
	return ""
}

// casAuth checks a CAS token.
func (b *Buckets) casAuth(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	b.Mu.Lock()
	defer b.Mu.Unlock()
	exp, known := b.tokens[tok]
	return ok && known && time.Now().Before(exp)
}

func (b *Buckets) serveCAS(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	kind := "cas"
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/v1/xorbs/"):
		kind = "xorb"
	case r.Method == http.MethodPost && p == "/v1/shards":
		kind = "shard"
	case strings.HasPrefix(p, "/v1/reconstructions/"):
		kind = "reconstruction"
	case strings.HasPrefix(p, "/xorb/"):
		kind = "xorb-get"
	}
	if f := b.hit(kind, r); f != nil {
		io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20)) // else the server lingers 500 ms on the close
		writeFault(w, f)
		return
	}
	if kind == "xorb-get" { // a presigned URL: no token
		b.serveXorbBytes(w, r, strings.TrimPrefix(p, "/xorb/"))
		return
	}
	if !b.casAuth(r) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20))
		http.Error(w, "invalid or expired CAS token", http.StatusUnauthorized)
		return
	}
	switch kind {
	case "xorb":
		b.serveXorbUpload(w, r, p)
	case "shard":
		b.serveShardUpload(w, r)
	case "reconstruction":
		b.serveReconstruction(w, r, strings.TrimPrefix(p, "/v1/reconstructions/"))
	default: // /v2/reconstructions, /v2/shards, /v1/chunks (global dedup): not offered
		http.Error(w, "not found", http.StatusNotFound)
	}
}

// serveXorbUpload stores a xorb after parsing it and checking that its
// chunks hash to the name it is uploaded under.
func (b *Buckets) serveXorbUpload(w http.ResponseWriter, r *http.Request, p string) {
	prefix, name, _ := strings.Cut(strings.TrimPrefix(p, "/v1/xorbs/"), "/")
	h, err := xet.ParseHash(name)
	if err != nil || prefix != "default" {
		http.Error(w, "bad xorb key "+p, http.StatusBadRequest)
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 2*xet.MaxXorbBytes))
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	b.Mu.Lock()
	delay := b.XorbDelay
	b.Mu.Unlock()
	if delay > 0 { // after the body: the server notices a client that gives up
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	chunks, err := xet.ParseXorb(data)
	if err == nil && len(chunks) == 0 {
		err = fmt.Errorf("no chunks")
	}
	if err != nil {
		b.refuse(w, "xorb "+name+": "+err.Error())
		return
	}
	leaves := make([]xet.Chunk, len(chunks))
	for i, c := range chunks {
		leaves[i] = xet.Chunk{Hash: c.Hash, Size: uint64(len(c.Data))}
	}
	if got := xet.XorbHash(leaves); got != h {
		b.refuse(w, fmt.Sprintf("xorb hash mismatch: uploaded as %s, the chunks hash to %s", h, got))
		return
	}
	b.Mu.Lock()
	_, had := b.xorbs[h]
	if !had {
		b.xorbs[h] = &storedXorb{data: data, chunks: chunks}
	}
	b.Mu.Unlock()
	writeJSON(w, 200, map[string]bool{"was_inserted": !had})
}

// serveShardUpload records a shard's files after checking each against the
// stored xorbs: the xorbs exist (in this shard's xorb section too, with
// the same chunks), chunk ranges are inside them, segment sizes and
// verification hashes match the chunks, and the file hash is the hash of
// the file's chunks.
func (b *Buckets) serveShardUpload(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s, err := xet.ParseShard(data)
	if err != nil {
		b.refuse(w, err.Error())
		return
	}
	b.Mu.Lock()
	defer b.Mu.Unlock()
	for _, x := range s.Xorbs {
		if err := b.checkXorbInfo(x); err != nil {
			b.refuseLocked(w, err.Error())
			return
		}
	}
	for i := range s.Files {
		if err := b.checkFile(&s.Files[i]); err != nil {
			b.refuseLocked(w, err.Error())
			return
		}
	}
	for i := range s.Files {
		f := s.Files[i]
		b.files[f.Hash] = &f
	}
	b.Shards = append(b.Shards, data)
	writeJSON(w, 200, map[string]int{"result": 1})
}

func (b *Buckets) checkXorbInfo(x xet.XorbInfo) error {
	sx := b.xorbs[x.Hash]
	if sx == nil {
		return fmt.Errorf("shard: xorb %s was not uploaded", x.Hash)
	}
	if len(sx.chunks) != len(x.Chunks) {
		return fmt.Errorf("shard: xorb %s: %d chunks, the stored xorb has %d", x.Hash, len(x.Chunks), len(sx.chunks))
	}
	for i, c := range x.Chunks {
		if c.Hash != sx.chunks[i].Hash || c.Size != uint64(len(sx.chunks[i].Data)) {
			return fmt.Errorf("shard: xorb %s chunk %d differs from the stored xorb's", x.Hash, i)
		}
	}
	if x.BytesOnDisk != 0 && int(x.BytesOnDisk) != len(sx.data) { // hf_xet sends 0
		return fmt.Errorf("shard: xorb %s: %d bytes on disk, uploaded %d", x.Hash, x.BytesOnDisk, len(sx.data))
	}
	return nil
}

func (b *Buckets) checkFile(f *xet.FileInfo) error {
	var leaves []xet.Chunk
	for i, s := range f.Segments {
		sx := b.xorbs[s.Xorb]
		if sx == nil {
			return fmt.Errorf("shard: file %s segment %d: xorb %s was not uploaded", f.Hash, i, s.Xorb)
		}
		if int(s.End) > len(sx.chunks) {
			return fmt.Errorf("shard: file %s segment %d: chunks [%d, %d) of a %d-chunk xorb", f.Hash, i, s.Start, s.End, len(sx.chunks))
		}
		var n uint32
		var hashes []xet.Hash
		for _, c := range sx.chunks[s.Start:s.End] {
			n += uint32(len(c.Data))
			hashes = append(hashes, c.Hash)
			leaves = append(leaves, xet.Chunk{Hash: c.Hash, Size: uint64(len(c.Data))})
		}
		if n != s.Bytes {
			return fmt.Errorf("shard: file %s segment %d: %d bytes, the chunks hold %d", f.Hash, i, s.Bytes, n)
		}
		if xet.RangeHash(hashes) != s.Verify {
			return fmt.Errorf("shard: file %s segment %d: wrong verification hash", f.Hash, i)
		}
	}
	if got := xet.FileHash(leaves); got != f.Hash {
		return fmt.Errorf("shard: file recorded as %s, its chunks hash to %s", f.Hash, got)
	}
	return nil
}

// serveReconstruction answers v1 reconstruction queries: the terms (xorb,
// chunk range, unpacked length) of the file's segments that overlap the
// requested byte range, and per xorb the URLs and byte ranges to fetch.
func (b *Buckets) serveReconstruction(w http.ResponseWriter, r *http.Request, name string) {
	h, err := xet.ParseHash(name)
	b.Mu.Lock()
	defer b.Mu.Unlock()
	fi := b.files[h]
	if err != nil || fi == nil {
		http.Error(w, "file not found", http.StatusNotFound)
		return
	}
	size := int64(fi.Size())
	start, end := int64(0), size-1
	if rng := r.Header.Get("Range"); rng != "" {
		var ok bool
		if start, end, ok = ParseRange(rng, size); !ok {
			http.Error(w, "range not satisfiable", http.StatusRequestedRangeNotSatisfiable)
			return
		}
	}
	type rangeJSON struct {
		Start int64 `json:"start"`
		End   int64 `json:"end"`
	}
	type term struct {
		Hash           string    `json:"hash"`
		UnpackedLength uint32    `json:"unpacked_length"`
		Range          rangeJSON `json:"range"`
	}
	type fetchInfo struct {
		Range    rangeJSON `json:"range"`
		URL      string    `json:"url"`
		URLRange rangeJSON `json:"url_range"`
	}
	terms := []term{}
	fetch := map[string][]fetchInfo{}
	var off int64
	first := int64(-1)
	for _, s := range fi.Segments {
		segStart, segEnd := off, off+int64(s.Bytes)
		off = segEnd
		if segEnd <= start || segStart > end {
			continue
		}
		if first < 0 {
			first = start - segStart
		}
		x := b.xorbs[s.Xorb]
		terms = append(terms, term{Hash: s.Xorb.String(), UnpackedLength: s.Bytes, Range: rangeJSON{int64(s.Start), int64(s.End)}})
		fetch[s.Xorb.String()] = append(fetch[s.Xorb.String()], fetchInfo{
			Range:    rangeJSON{int64(s.Start), int64(s.End)},
			URL:      b.CAS.URL + "/xorb/" + s.Xorb.String(),
			URLRange: rangeJSON{int64(x.chunks[s.Start].Start), int64(x.chunks[s.End-1].End - 1)},
		})
	}
	writeJSON(w, 200, map[string]any{"offset_into_first_range": max(first, 0), "terms": terms, "fetch_info": fetch})
}

func (b *Buckets) serveXorbBytes(w http.ResponseWriter, r *http.Request, name string) {
	h, err := xet.ParseHash(name)
	b.Mu.Lock()
	x := b.xorbs[h]
	b.Mu.Unlock()
	if err != nil || x == nil {
		http.Error(w, "no such xorb", http.StatusNotFound)
		return
	}
	serveRange(w, r, x.data)
}

// refuse answers 400 with msg and records it (Refusals; GET
// /_fake/refusals).
func (b *Buckets) refuse(w http.ResponseWriter, msg string) {
	b.Mu.Lock()
	defer b.Mu.Unlock()
	b.refuseLocked(w, msg)
}

func (b *Buckets) refuseLocked(w http.ResponseWriter, msg string) {
	b.Refusals = append(b.Refusals, msg)
	http.Error(w, msg, http.StatusBadRequest)
}

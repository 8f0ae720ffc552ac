package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lrstream/lrstream/fetch"
)

// getRange reads the bytes [off, end) of the object key pinned at p.
func (s *Source) getRange(ctx context.Context, key string, p Pin, off, end int64) ([]byte, error) {
	buf := make([]byte, end-off)
	w := &sliceWriter{buf: buf}
	if err := s.stream(ctx, key, p, off, end, w); err != nil {
		return nil, err
	}
	return buf, nil
}

type sliceWriter struct {
	buf []byte
	n   int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, errors.New("more bytes than asked for")
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

// stream writes the bytes [off, end) of the object to w with ranged GETs
// that ask for the pinned ETag (If-Match). The SDK retries failed requests;
// a body cut mid-way or stalled is resumed from the last byte received,
// within the retry budget (fetch.RetryPolicy.MaxAttempts bodies).
func (s *Source) stream(ctx context.Context, key string, p Pin, off, end int64, w io.Writer) error {
	obj := URL(s.bucket, key)
	pol := s.opts.Retry
	for attempt := 1; off < end; attempt++ {
		n, err := s.streamOnce(ctx, key, p, off, end, w)
		off += n
		if err == nil || off >= end {
			return err
		}
		var we *writeError
		if errors.As(err, &we) {
			return we.err
		}
		if !errors.Is(err, errBody) {
			return err
		}
		if attempt >= pol.MaxAttempts {
			return s.scrub(&Error{Op: "get", Object: obj, Attempts: attempt, Err: err})
		}
		s.stats.retries.Add(1)
		s.log.Debug("s3: body interrupted, resuming", "object", obj, "at", off, "err", err)
		t := time.NewTimer(backoff(pol, attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// errBody marks errors of a response body (cut, stalled): resumable.
var errBody = errors.New("response body interrupted")

type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }

// streamOnce is one ranged GET; it returns how many bytes it wrote.
func (s *Source) streamOnce(ctx context.Context, key string, p Pin, off, end int64, w io.Writer) (int64, error) {
	obj := URL(s.bucket, key)
	in := &awss3.GetObjectInput{
		Bucket:  aws.String(s.bucket),
		Key:     aws.String(key),
		IfMatch: aws.String(quoteETag(p.ETag)),
		Range:   aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end-1, 10)),
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return 0, s.changedOr(s.opError("get", obj, err), p)
	}
	body := fetch.NewStallReader(out.Body, s.opts.StallTimeout)
	defer body.Close()
	if got := normalizeETag(aws.ToString(out.ETag)); got != "" && got != p.ETag {
		return 0, fmt.Errorf("get %s: ETag %s, pinned %s: %w", obj, got, p.ETag, ErrObjectChanged)
	}
	start, last, total, ok := fetch.ParseContentRange(aws.ToString(out.ContentRange))
	if !ok || start != off || last >= end || (total >= 0 && total != p.Size) {
		return 0, fmt.Errorf("get %s: Content-Range %q does not match the requested bytes %d-%d of %d", obj, shorten(aws.ToString(out.ContentRange), 80), off, end-1, p.Size)
	}
	want := last - start + 1
	n, err := io.Copy(&countWriter{w: w, n: &s.stats.bytes}, io.LimitReader(body, want))
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return n, err
		}
		return n, fmt.Errorf("%w: %w", errBody, err)
	}
	if n < want {
		return n, fmt.Errorf("%w: %w after %d of %d bytes", errBody, io.ErrUnexpectedEOF, n, want)
	}
	return n, nil
}

// changedOr names the pin in a failed If-Match or a vanished object.
func (s *Source) changedOr(err error, p Pin) error {
	var e *Error
	if errors.As(err, &e) && (errors.Is(e, ErrObjectChanged) || e.Code == "NoSuchKey") {
		return fmt.Errorf("%w (pinned ETag %s, %d bytes, when the run started): %w", err, p.ETag, p.Size, ErrObjectChanged)
	}
	return err
}

func quoteETag(e string) string { return `"` + e + `"` }

// countWriter counts the bytes written and marks write errors.
type countWriter struct {
	w io.Writer
	n interface{ Add(int64) int64 }
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	if err != nil {
		return n, &writeError{err: err}
	}
	return n, nil
}

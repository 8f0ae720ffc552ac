package s3

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lrstream/lrstream/fetch"
)

// Get returns the body of the bytes [off, end) of name: a ranged GET
// asking for the pinned ETag (If-Match), whose answer is checked (ETag,
// Content-Range). The SDK retries the request.
func (s *Store) Get(ctx context.Context, name string, p Pin, off, end int64) (io.ReadCloser, error) {
	key := s.Key(name)
	obj := URL(s.bucket, key)
	in := &awss3.GetObjectInput{
		Bucket:  aws.String(s.bucket),
		Key:     aws.String(key),
		IfMatch: aws.String(quoteETag(p.ETag)),
		Range:   aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(end-1, 10)),
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, changedOr(s.opError("get", obj, err), p)
	}
	if got := normalizeETag(aws.ToString(out.ETag)); got != "" && got != p.ETag {
		out.Body.Close()
		return nil, fmt.Errorf("get %s: ETag %s, pinned %s: %w", obj, got, p.ETag, ErrObjectChanged)
	}
	start, last, total, ok := fetch.ParseContentRange(aws.ToString(out.ContentRange))
	if !ok || start != off || last != end-1 || (total >= 0 && total != p.Size) {
		out.Body.Close()
		return nil, fmt.Errorf("get %s: Content-Range %q does not match the requested bytes %d-%d of %d", obj, shorten(aws.ToString(out.ContentRange), 80), off, end-1, p.Size)
	}
	return out.Body, nil
}

// changedOr names the pin in a failed If-Match or a vanished object.
func changedOr(err error, p Pin) error {
	var e *Error
	if errors.As(err, &e) && (errors.Is(e, ErrObjectChanged) || e.Code == "NoSuchKey") {
		return fmt.Errorf("%w (pinned ETag %s, %d bytes, when the run started): %w", err, p.ETag, p.Size, ErrObjectChanged)
	}
	return err
}

func quoteETag(e string) string { return `"` + e + `"` }

// Verify checks a downloaded object's MD5 when its ETag is a plain MD5 (32
// hex digits: a single-part upload without SSE-KMS/SSE-C, which is what
// every store answers for those); other ETags (multipart "…-N") are not
// content hashes, and only the size is checked.
func (s *Store) Verify(name string, p Pin, r io.ReaderAt) error {
	if len(p.ETag) != 32 {
		return nil
	}
	if _, err := hex.DecodeString(p.ETag); err != nil {
		return nil
	}
	h := md5.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, p.Size)); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.ETag {
		return fmt.Errorf("content MD5 %s, ETag %s", got, p.ETag)
	}
	return nil
}

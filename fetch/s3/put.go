package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lrstream/lrstream/fetch/objstore"
)

// DefaultPartSize is the part size of multipart uploads, and the size from
// which a file is uploaded in parts (S3's minimum part is 5 MiB).
const DefaultPartSize = 64 << 20

// PublishStats says what Publish did.
type PublishStats struct {
	Uploaded, Skipped, Multipart int
	Bytes                        int64
}

// Publish uploads the files names (relative to dir, slash-separated) to
// spec (s3://BUCKET/PREFIX/NAME each). The files of last (the index of a
// pre-render) are uploaded after every other one, so a reader that finds
// them finds every file they name; a remote copy of a last file that
// differs from the local one is deleted before anything else is uploaded,
// so a reader never pairs an old index with new files. Files larger than
// partSize (DefaultPartSize when 0) go up in parts. A file already in the
// store with the same size and ETag (its MD5, or the MD5 of its parts'
// MD5s as multipart uploads compute it) is skipped: an interrupted publish
// resumes.
func Publish(ctx context.Context, spec, dir string, names, last []string, partSize int64, opts Options) (PublishStats, error) {
	var st PublishStats
	opts.Offline = false
	s, _, err := dial(ctx, spec, opts)
	if err != nil {
		return st, err
	}
	if partSize <= 0 {
		partSize = DefaultPartSize
	}
	partSize = max(partSize, 5<<20)
	for _, n := range last {
		same, _, err := s.sameRemote(ctx, dir, n, partSize)
		if err != nil {
			return st, s.scrub(err)
		}
		if !same {
			if _, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.Key(n))}); err != nil {
				return st, s.opError("delete", URL(s.bucket, s.Key(n)), err)
			}
		}
	}
	var first []string
	for _, n := range names {
		if !slices.Contains(last, n) {
			first = append(first, n)
		}
	}
	for _, n := range append(first, last...) {
		if err := s.publishOne(ctx, dir, n, partSize, &st); err != nil {
			return st, s.scrub(err)
		}
	}
	return st, nil
}

// publishOne uploads one file unless the store has it already.
func (s *Store) publishOne(ctx context.Context, dir, name string, partSize int64, st *PublishStats) error {
	if err := validKeyName(name); err != nil {
		return err
	}
	same, size, err := s.sameRemote(ctx, dir, name, partSize)
	if err != nil {
		return err
	}
	if same {
		st.Skipped++
		return nil
	}
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	defer f.Close()
	if size > partSize {
		st.Multipart++
		err = s.putMultipart(ctx, f, name, size, partSize)
	} else {
		_, err = s.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket: aws.String(s.bucket), Key: aws.String(s.Key(name)),
			Body: io.NewSectionReader(f, 0, size), ContentLength: aws.Int64(size),
		})
		if err != nil {
			err = s.opError("put", URL(s.bucket, s.Key(name)), err)
		}
	}
	if err != nil {
		return err
	}
	st.Uploaded++
	st.Bytes += size
	return nil
}

func validKeyName(name string) error {
	if err := objstore.ValidKey(name); err != nil {
		return fmt.Errorf("publish %q: %w", name, err)
	}
	return nil
}

// sameRemote reports whether the store holds name with the local file's
// size and ETag; size is the local file's.
func (s *Store) sameRemote(ctx context.Context, dir, name string, partSize int64) (bool, int64, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return false, 0, fmt.Errorf("publish: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, 0, fmt.Errorf("publish: %w", err)
	}
	head, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.Key(name))})
	if err != nil {
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return false, fi.Size(), nil
		}
		return false, 0, s.opError("head", URL(s.bucket, s.Key(name)), err)
	}
	if aws.ToInt64(head.ContentLength) != fi.Size() {
		return false, fi.Size(), nil
	}
	want, err := localETag(f, fi.Size(), partSize)
	if err != nil {
		return false, 0, fmt.Errorf("publish %s: %w", name, err)
	}
	return normalizeETag(aws.ToString(head.ETag)) == want, fi.Size(), nil
}

// localETag is the ETag S3 computes for the file uploaded as Publish
// uploads it: the MD5, or for a multipart upload the MD5 of the parts'
// MD5s followed by "-" and the part count.
func localETag(r io.ReaderAt, size, partSize int64) (string, error) {
	if size <= partSize {
		h := md5.New()
		if _, err := io.Copy(h, io.NewSectionReader(r, 0, size)); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	var sums bytes.Buffer
	n := 0
	for off := int64(0); off < size; off += partSize {
		h := md5.New()
		if _, err := io.Copy(h, io.NewSectionReader(r, off, min(partSize, size-off))); err != nil {
			return "", err
		}
		sums.Write(h.Sum(nil))
		n++
	}
	sum := md5.Sum(sums.Bytes())
	return hex.EncodeToString(sum[:]) + "-" + strconv.Itoa(n), nil
}

// putMultipart uploads f in parts of partSize; a failure aborts the
// upload (no parts left behind).
func (s *Store) putMultipart(ctx context.Context, f *os.File, name string, size, partSize int64) error {
	key := s.Key(name)
	obj := URL(s.bucket, key)
	up, err := s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return s.opError("create multipart upload", obj, err)
	}
	abort := func(err error) error {
		// The abort runs even when ctx was cancelled.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.HeaderTimeout)
		defer cancel()
		s.client.AbortMultipartUpload(actx, &awss3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: up.UploadId})
		return err
	}
	var parts []types.CompletedPart
	for n, off := int32(1), int64(0); off < size; n, off = n+1, off+partSize {
		ln := min(partSize, size-off)
		out, err := s.client.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: up.UploadId, PartNumber: aws.Int32(n),
			Body: io.NewSectionReader(f, off, ln), ContentLength: aws.Int64(ln),
		})
		if err != nil {
			return abort(s.opError(fmt.Sprintf("upload part %d of", n), obj, err))
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return abort(s.opError("complete multipart upload", obj, err))
	}
	return nil
}

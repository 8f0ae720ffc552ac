package s3

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/lrstream/lrstream/fetch"
	"github.com/lrstream/lrstream/fetch/objstore"
)

// ErrObjectChanged is objstore.ErrObjectChanged: an object whose ETag is
// no longer the one pinned when the run started (or that was deleted).
var ErrObjectChanged = objstore.ErrObjectChanged

// Error is a failed S3 operation. It names the operation and the object,
// never a credential or a signature.
type Error struct {
	Op       string // list, get, put, …
	Object   string // s3://BUCKET/KEY
	Status   int    // HTTP status, 0 without a response
	Code     string // S3 error code (NoSuchBucket, AccessDenied, …)
	Message  string // S3 error message
	Attempts int    // attempts made when the retry budget ran out, else 0
	Err      error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s %s: ", e.Op, e.Object)
	if e.Attempts > 0 {
		msg += fmt.Sprintf("giving up after %d attempts (%v), last error: ", e.Attempts, fetch.ErrRetryBudget)
	}
	switch {
	case e.Code != "" || e.Status != 0:
		if e.Status != 0 {
			msg += fmt.Sprintf("status %d %s", e.Status, http.StatusText(e.Status))
		}
		if e.Code != "" {
			msg += " " + e.Code
		}
		if e.Message != "" {
			msg += ": " + e.Message
		}
		msg += e.hint()
	default:
		msg += e.Err.Error()
	}
	return msg
}

func (e *Error) hint() string {
	switch {
	case e.Code == "NoSuchBucket":
		return " (check the bucket name, and AWS_ENDPOINT_URL / AWS_REGION)"
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		e.Code == "InvalidAccessKeyId" || e.Code == "SignatureDoesNotMatch" ||
		strings.HasSuffix(e.Code, "UserNotFound"): // versitygw: 404 XAdminUserNotFound for an unknown key
		return " (check the credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE; AWS_NO_SIGN_REQUEST=YES for a public bucket)"
	case e.Status >= 300 && e.Status < 400 || e.Code == "PermanentRedirect":
		return " (the bucket is in another region or needs another endpoint: set AWS_REGION or AWS_ENDPOINT_URL; redirects are not followed)"
	}
	return ""
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches fs.ErrNotExist for a missing bucket or object,
// ErrObjectChanged for a failed If-Match, fetch.ErrRetryBudget when the
// budget ran out.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == "NoSuchKey" || e.Code == "NoSuchBucket" ||
			e.Status == http.StatusNotFound && (e.Code == "" || e.Code == "NotFound")
	case ErrObjectChanged:
		return e.Status == http.StatusPreconditionFailed || e.Code == "PreconditionFailed"
	case fetch.ErrRetryBudget:
		return e.Attempts > 0
	}
	return false
}

// opError describes an SDK error of op on object.
func (s *Store) opError(op, object string, err error) error {
	e := &Error{Op: op, Object: object, Err: err}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		e.Status = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		e.Code, e.Message = ae.ErrorCode(), shorten(ae.ErrorMessage(), 200)
	}
	var me *retry.MaxAttemptsError
	if errors.As(err, &me) {
		e.Attempts = me.Attempt
	}
	return s.scrub(e)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func backoff(p fetch.RetryPolicy, attempt int) time.Duration { return objstore.Backoff(p, attempt) }

// Package s3test runs a real S3-compatible server for tests: versitygw
// (Apache-2.0, github.com/versity/versitygw) with its posix backend, built
// by scripts/test.sh into a cached directory and found through
// LRSTREAM_S3_SERVER (the binary's path). Without it the tests skip, except
// when CI or LRSTREAM_REQUIRE_S3_SERVER is set: then they fail. It also
// has an HTTP proxy that counts the bytes each client reads and injects
// faults (503 storms, cut bodies, stalls).
package s3test

import (
	"bytes"
	"context"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// Test credentials of the server's root user.
const (
	AccessKey = "lrstream-test-access"
	SecretKey = "lrstream-test-secret-0123456789"
	Region    = "us-east-1"
)

// Server is one versitygw process serving a temporary directory.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint string
	bin      string
	addr     string
	data     string
	meta     string
	// virtualDomain, when set, is versitygw's --virtual-domain: requests
	// to BUCKET.virtualDomain address the bucket by host.
	virtualDomain string
	cmd           *exec.Cmd
	exited        chan struct{}
	t             testing.TB
}

// Binary returns the server binary, skipping the test when there is none
// (failing when CI or LRSTREAM_REQUIRE_S3_SERVER says it must be there).
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("LRSTREAM_S3_SERVER")
	if bin == "" {
		if os.Getenv("CI") != "" || os.Getenv("LRSTREAM_REQUIRE_S3_SERVER") != "" {
			t.Fatal("LRSTREAM_S3_SERVER is not set: the S3 tests need the versitygw binary scripts/test.sh builds")
		}
		t.Skip("LRSTREAM_S3_SERVER is not set (scripts/test.sh builds versitygw and sets it)")
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("LRSTREAM_S3_SERVER=%s: not an executable file (%v)", bin, err)
	}
	return bin
}

// Start runs a server on a free loopback port; it is stopped when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartVirtual(t, "")
}

// StartVirtual is Start with virtual-hosted-style addressing enabled for
// the base domain domain (versitygw --virtual-domain): a request whose
// Host is BUCKET.domain[:PORT] addresses BUCKET; path-style requests to
// domain still work. Clients reach BUCKET.domain through a dialer that
// connects to the server's address (no DNS).
func StartVirtual(t testing.TB, domain string) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{bin: Binary(t), data: filepath.Join(dir, "data"), meta: filepath.Join(dir, "meta"), t: t, virtualDomain: domain}
	for _, d := range []string{s.data, s.meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	l.Close()
	s.Endpoint = "http://" + s.addr
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts the server again (after Stop) on the same port and data.
func (s *Server) Restart() {
	s.t.Helper()
	args := []string{"--port", s.addr, "--access", AccessKey, "--secret", SecretKey, "--region", Region, "--quiet"}
	if s.virtualDomain != "" {
		args = append(args, "--virtual-domain", s.virtualDomain)
	}
	cmd := exec.Command(s.bin, append(args, "posix", "--sidecar", s.meta, s.data)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exited:
			s.t.Fatalf("versitygw exited at start: %s", out.String())
		default:
		}
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("versitygw did not listen on %s within 30s: %s", s.addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (as a crash would) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Client is an S3 client of the root user (path-style).
func (s *Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		// versitygw knows the flexible checksums, but the tests upload as
		// plainly as other stores need.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(name string) {
	s.t.Helper()
	if _, err := s.Client().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		s.t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Put uploads one object.
func (s *Server) Put(bucket, key string, data []byte) {
	s.t.Helper()
	_, err := s.Client().PutObject(context.Background(), &awss3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		s.t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

// PutDir uploads every file under dir to bucket/prefix/… and returns the
// relative paths uploaded with their sizes.
func (s *Server) PutDir(bucket, prefix, dir string) map[string]int64 {
	s.t.Helper()
	files := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if prefix != "" {
			key = prefix + "/" + key
		}
		s.Put(bucket, key, b)
		files[filepath.ToSlash(rel)] = int64(len(b))
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return files
}

// Env returns the environment of a client of this server (for
// fetch/s3.OptionsFromEnv or the CLI): endpoint, keys, region, no instance
// metadata lookups.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL": s.Endpoint, "AWS_ACCESS_KEY_ID": AccessKey, "AWS_SECRET_ACCESS_KEY": SecretKey,
		"AWS_REGION": Region, "AWS_EC2_METADATA_DISABLED": "true",
	}
}

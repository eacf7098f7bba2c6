// Package testseaweed runs SeaweedFS (github.com/seaweedfs/seaweedfs, Apache
// 2.0) as a separate process, `weed server -s3` with its default S3
// settings, for the tests that must meet a second widely deployed S3 server
// as production does: signatures, checksum headers, multipart uploads and
// conditional writes over the wire, as versitygw (internal/testversity) is
// the first. It holds nothing else and is imported only by tests.
package testseaweed

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/walkstage/walkstage/internal/testtool"
	"github.com/walkstage/walkstage/internal/testversity"
)

// Start runs SeaweedFS (master, volume server, filer and S3 gateway in one
// `weed server` process) with one identity, the credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, serving a fresh directory,
// and returns its S3 endpoint ("http://127.0.0.1:port") once a bucket can
// be created and written; the process is killed at the test's end. The
// binary is $WEED, else weed on PATH, else bin/weed at the repository
// root (scripts/test.sh installs it there). Without it the test skips,
// unless WALKSTAGE_INTEGRATION=1, when it fails.
func Start(t testing.TB) (endpoint string) {
	t.Helper()
	bin := testtool.Find("WEED", "weed")
	if bin == "" {
		if os.Getenv("WALKSTAGE_INTEGRATION") == "1" {
			t.Fatal("weed (SeaweedFS) not found ($WEED, PATH or ./bin) and WALKSTAGE_INTEGRATION=1")
		}
		t.Skip("weed (SeaweedFS) not found ($WEED, PATH or ./bin); scripts/test.sh installs it")
	}
	dir := t.TempDir()
	// Ports are picked free and released before weed binds them, so
	// another process can take one in between: weed then exits, and the
	// launch is tried again on new ports.
	const tries = 5
	for try := 1; ; try++ {
		endpoint, lost := launch(t, bin, filepath.Join(dir, strconv.Itoa(try)))
		if !lost {
			return endpoint
		}
		if try == tries {
			t.Fatalf("weed lost a port to another process %d times", tries)
		}
	}
}

// Args is the command line of a `weed server` serving S3 on 127.0.0.1:s3Port
// from dir, every other listener on the ports of others (master, master
// gRPC, volume, volume gRPC, filer, filer gRPC, S3 gRPC). The S3 settings
// are SeaweedFS's defaults; off are only what a test must not do (report
// telemetry to the network) and listeners it does not need (the Iceberg
// and Lance catalogs).
func Args(dir string, s3Port int, others [7]int) []string {
	p := func(i int) string { return strconv.Itoa(others[i]) }
	return []string{"server", "-dir=" + dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
		"-master.port=" + p(0), "-master.port.grpc=" + p(1), "-volume.port=" + p(2), "-volume.port.grpc=" + p(3),
		"-filer", "-filer.port=" + p(4), "-filer.port.grpc=" + p(5),
		"-s3", "-s3.port=" + strconv.Itoa(s3Port), "-s3.port.grpc=" + p(6), "-s3.port.iceberg=0", "-s3.port.lance=0"}
}

// launch starts weed on free ports and waits until its S3 gateway takes a
// bucket and an object; lost is true when it exited because another
// process had bound one of its ports.
func launch(t testing.TB, bin, dir string) (endpoint string, lost bool) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 8)
	var logs bytes.Buffer
	cmd := exec.Command(bin, Args(dir, ports[0], [7]int(ports[1:]))...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start weed: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	kill := func() {
		cmd.Process.Kill()
		<-exited
	}
	endpoint = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-exited:
			if strings.Contains(logs.String(), "address already in use") {
				return "", true
			}
			t.Fatalf("weed exited: %v\n%s", err, logs.String())
		default:
		}
		if ok, _ := testversity.Listening(cmd.Process.Pid, ports[0]); ok && ready(endpoint) == nil {
			t.Cleanup(func() {
				kill()
				if t.Failed() {
					t.Logf("weed output:\n%s", tail(logs.String(), 4000))
				}
			})
			return endpoint, false
		}
		if time.Now().After(deadline) {
			err := ready(endpoint)
			kill()
			t.Fatalf("weed's S3 gateway not ready on %s: %v\n%s", endpoint, err, tail(logs.String(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ready creates a bucket and writes an object in it: the gateway answers
// before the filer and a volume can take data.
func ready(endpoint string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}, nil
		})})
	const probe = "walkstage-ready"
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(probe)}); err != nil {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(probe)}); err != nil {
			return fmt.Errorf("create bucket: %w", err)
		}
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(probe), Key: aws.String("probe"), Body: strings.NewReader("ok")}); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return nil
}

// freePorts returns n distinct ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

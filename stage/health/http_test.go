package health

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// secretPass is a password that must appear nowhere.
const secretPass = "Pa55-w0rd-not-for-logs"

// TestProbeBodiesMaskURLCredentials: /readyz and /healthz say why they
// fail to whoever reaches the port; a reason quoting a URL (a catalog, a
// store endpoint) has its credentials masked there as well.
func TestProbeBodiesMaskURLCredentials(t *testing.T) {
	why := errors.New("graph s3://alice:" + secretPass + "@graphs/CURRENT?X-Amz-Signature=" + secretPass + ": 503")
	srv := httptest.NewServer(Handler(prometheus.NewRegistry(), func() error { return why }, func() error { return why }))
	defer srv.Close()
	for _, p := range []string{"/readyz", "/healthz"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(body), secretPass) ||
			!strings.Contains(string(body), "alice:xxxxx@graphs") {
			t.Errorf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
}

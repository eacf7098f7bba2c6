package health

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/walkstage/walkstage/internal/redact"
)

// Handler serves /metrics from reg, /healthz from healthy and /readyz
// from ready (nil: 200, else 503 with the reason, which may quote a URL:
// masked, as anyone who reaches the port reads it). The stage's Main serves
// it before the stage exists, while the graph loads, and the stage after.
func Handler(reg *prometheus.Registry, ready, healthy func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, "unhealthy: "+redact.String(err.Error()), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+redact.String(err.Error()), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// keepOpen hands a listener to a server that may not close it.
type keepOpen struct{ net.Listener }

func (keepOpen) Close() error { return nil }

// ServeUntilHandoff serves h on ln until the returned stop is called; stop
// returns once that server no longer accepts, leaving ln open for the next.
// (Shutdown cannot interrupt an Accept without closing the socket, so an
// expired deadline does.)
func ServeUntilHandoff(ln net.Listener, h http.Handler) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		srv.Serve(keepOpen{ln})
		close(served)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			// Expire Accept first: Shutdown waits for Serve to leave it.
			// Serve retries the timeouts until Shutdown marks it closing.
			tl, _ := ln.(*net.TCPListener)
			if tl != nil {
				tl.SetDeadline(time.Unix(1, 0))
			}
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
			if tl != nil {
				<-served
				tl.SetDeadline(time.Time{})
			}
		})
	}
}

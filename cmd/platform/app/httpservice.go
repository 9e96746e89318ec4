package app

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// httpService is the API's HTTP server as a startstop.Service: Start
// serves on the listener, Stop shuts it down gracefully for at most the
// grace period and then closes the connections still open.
type httpService struct {
	srv    *http.Server
	ln     net.Listener
	grace  time.Duration
	log    *slog.Logger
	served chan error // what Serve returned, if it ended on its own
}

func newHTTPService(handler http.Handler, ln net.Listener, grace time.Duration, log *slog.Logger) *httpService {
	return &httpService{
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			// No WriteTimeout: a streamed turn lasts as long as the model takes.
			IdleTimeout: 2 * time.Minute,
			ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln: ln, grace: grace, log: log, served: make(chan error, 1),
	}
}

func (s *httpService) Name() string { return "http server" }

func (s *httpService) addr() string { return s.ln.Addr().String() }

func (s *httpService) Start(context.Context) error {
	go func() { s.served <- s.srv.Serve(s.ln) }()
	return nil
}

// close releases the listener of a service that never started.
func (s *httpService) close() { _ = s.ln.Close() }

func (s *httpService) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		// Grace is over: closing the connections cancels the requests'
		// contexts, which ends their turns.
		s.log.Warn("requests still running at the end of the grace period; closing them", "err", err)
		_ = s.srv.Close()
	}
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Server is a listening HTTP server: the proxy's listener lifecycle. A
// *Proxy handler is served by the proxy's own HTTP/1.1 engine (see
// Options.Engine), any other handler by net/http.
type Server struct {
	srv *http.Server
	eng *engine
	ln  net.Listener
}

// Listen binds addr now (so the caller can print the address before
// serving) and returns a Server for h. A busy port gets an error that says
// which port and what to do.
func Listen(addr string, h http.Handler, logger *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listening on %s: the address is in use (is another mcptape running?); choose another with --listen", addr)
		}
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	var el *log.Logger
	if logger != nil {
		el = slog.NewLogLogger(logger.Handler(), slog.LevelDebug)
	} else {
		el = log.New(discard{}, "", 0)
	}
	if p, ok := h.(*Proxy); ok && p.engine {
		return &Server{ln: ln, eng: newEngine(p, p.tlsConf)}, nil
	}
	return &Server{ln: ln, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          el,
	}}, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Addr is the bound address, e.g. "127.0.0.1:7000".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://" + Addr, with a loopback wildcard shown as 127.0.0.1.
func (s *Server) URL() string {
	a := s.Addr()
	if strings.HasPrefix(a, "[::]:") {
		a = "127.0.0.1:" + strings.TrimPrefix(a, "[::]:")
	} else if strings.HasPrefix(a, "0.0.0.0:") {
		a = "127.0.0.1:" + strings.TrimPrefix(a, "0.0.0.0:")
	}
	return "http://" + a
}

// Serve serves until Shutdown; it returns nil after a Shutdown.
func (s *Server) Serve() error {
	if s.eng != nil {
		return s.eng.serve(s.ln)
	}
	err := s.srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, waits for requests in flight up to ctx, then
// closes what is left (long-lived SSE streams).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.eng != nil {
		s.eng.closing.Store(true)
		_ = s.ln.Close()
		return s.eng.shutdown(ctx)
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	return err
}

// Close stops the server at once.
func (s *Server) Close() error {
	if s.eng != nil {
		s.eng.closing.Store(true)
		err := s.ln.Close()
		s.eng.closeAll()
		s.eng.closeIdle()
		return err
	}
	return s.srv.Close()
}

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

// ServerOptions configures a Server. Nil means defaults; every field's
// zero value is documented.
type ServerOptions struct {
	// Logger receives net/http's own errors, at debug level. Nil discards
	// them.
	Logger *slog.Logger
	// HeaderTimeout bounds reading a request's head, from its first byte
	// (a client that trickles its head is cut). Zero means 30s.
	HeaderTimeout time.Duration
	// IdleTimeout is how long an idle keep-alive connection stays open.
	// Zero means 5 minutes.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's head (request line and header
	// fields); a larger one is answered 431 and never forwarded. Zero
	// means 1 MiB.
	MaxHeaderBytes int
}

// Defaults of the ServerOptions fields whose zero value means one.
const (
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultMaxHeaderBytes = 1 << 20
)

// Server is a listening HTTP server: the proxy's listener lifecycle, on
// Go's net/http server, which parses every request (see the package
// documentation for what it refuses).
type Server struct {
	srv *http.Server
	eng *engine // a reverse proxy's own engine (engine.go); nil: srv serves
	ln  net.Listener
	h   http.Handler
}

// Listen binds addr now (so the caller can print the address before
// serving) and returns a Server for h. A busy port gets an error that says
// which port and what to do.
func Listen(addr string, h http.Handler, o *ServerOptions) (*Server, error) {
	if o == nil {
		o = &ServerOptions{}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listening on %s: the address is in use (is another mcptape running?); choose another with --listen", addr)
		}
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	var el *log.Logger
	if o.Logger != nil {
		el = slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug)
	} else {
		el = log.New(discard{}, "", 0)
	}
	s := &Server{ln: ln, h: h, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: orDefault(o.HeaderTimeout, DefaultHeaderTimeout),
		IdleTimeout:       orDefault(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    int(orDefault(int64(o.MaxHeaderBytes), DefaultMaxHeaderBytes)),
		ErrorLog:          el,
	}}
	if p, ok := h.(*Proxy); ok && p.forward != nil {
		// Requests read from intercepted tunnels get the same bounds.
		p.forward.configure(ln.Addr(), s.srv.ReadHeaderTimeout, s.srv.IdleTimeout, s.srv.MaxHeaderBytes, o.Logger)
	} else if ok {
		// A reverse proxy's clients are served by the engine of its own
		// (engine.go), on connections that read and write without the
		// runtime's system-call bookkeeping (sock_linux.go). (The forward
		// leg's connections are handed over whole to the tunnels it
		// opens: net/http serves them.)
		s.ln = fastListen(ln)
		s.eng = newEngine(h, s.srv)
	}
	return s, nil
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
	var err error
	if s.eng != nil {
		err = s.eng.Serve(s.ln)
	} else {
		err = s.srv.Serve(s.ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server gracefully within ctx.
//
// Serving a *Proxy, it first drains: the streams a server keeps open at
// will and which carry no call (the standalone GET stream, a 2026-07-28
// subscriptions/listen) are cut at once; new calls (POSTs
// carrying a JSON-RPC request) are answered 503; everything else — a
// client's answers to the sampling, elicitation and roots requests of the
// calls in flight, notifications, cancellations — still goes through, so
// that the calls in flight can finish. When they have, or when ctx ends,
// what is left is cut, each cut exchange recorded with [ErrShutdown] as
// its error, and the listener and connections closed.
//
// Serving any other handler, it is net/http's Shutdown, then Close once
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	if p, ok := s.h.(*Proxy); ok {
		p.cut(false)
		tick := time.NewTicker(10 * time.Millisecond)
		for p.InFlight() > 0 && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		tick.Stop()
		if ctx.Err() != nil {
			err = ctx.Err()
			p.cut(true)
			// Give the cut exchanges a moment to record why they ended.
			deadline := time.Now().Add(2 * time.Second)
			for p.InFlight() > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
		}
	}
	if p, ok := s.h.(*Proxy); ok && p.forward != nil {
		p.forward.shutdown(ctx)
	}
	if serr := s.shutdown(ctx); serr != nil {
		_ = s.close()
		if err == nil {
			err = serr
		}
	}
	return err
}

func (s *Server) shutdown(ctx context.Context) error {
	if s.eng != nil {
		return s.eng.Shutdown(ctx)
	}
	return s.srv.Shutdown(ctx)
}

func (s *Server) close() error {
	if s.eng != nil {
		return s.eng.Close()
	}
	return s.srv.Close()
}

// Close stops the server at once.
func (s *Server) Close() error {
	if p, ok := s.h.(*Proxy); ok && p.forward != nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p.forward.shutdown(ctx)
	}
	return s.close()
}

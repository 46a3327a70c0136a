package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/protocol"
)

// WrapOptions configures Wrap. Nil means defaults.
type WrapOptions struct {
	// Stream records the traffic; nil records nothing.
	Stream *capture.Stream
	// Signals, if not nil, delivers the signals to pass on to the server
	// (the CLI sends SIGINT, SIGTERM and SIGHUP).
	Signals <-chan os.Signal
	// MaxLine bounds how much of one line is kept for the record; longer
	// lines are forwarded whole and recorded cut. Zero means 64 MiB.
	MaxLine int
	// Drain bounds how long the server's output is still read after the
	// server exited, for a grandchild that keeps it open. Zero means 2s.
	Drain time.Duration
}

// Wrap is the stdio leg: it starts cmd (its Path, Args, Env and Dir as the
// caller set them) and relays stdin to the server's stdin and the server's
// stdout and stderr to stdout and stderr, byte for byte and unbuffered:
// each read is written on at once, so a message reaches the other side as
// soon as its newline is read. Each complete line is reported to the
// stream just before it is forwarded (a copy, queued without waiting), so
// the record's order is the order things happened; recording never
// delays, alters or stops the relay. When stdin ends, the server's stdin is closed. Wrap returns
// when the server has exited and its output is drained, with the server's
// exit state.
func Wrap(ctx context.Context, cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer, opts *WrapOptions) (*os.ProcessState, error) {
	var o WrapOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 64 << 20
	}
	if o.Drain <= 0 {
		o.Drain = 2 * time.Second
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
			f.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	// The server holds its ends now.
	inR.Close()
	outW.Close()
	errW.Close()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		pump(outR, stdout, o.MaxLine, func(l []byte) { o.Stream.Line(protocol.ServerToClient, l) })
	}()
	go func() {
		defer wg.Done()
		pump(errR, stderr, o.MaxLine, o.Stream.Stderr)
	}()
	// stdin: a blocking read of the client's pipe that may outlive the
	// server; it is not waited for.
	go func() {
		pump(stdin, inW, o.MaxLine, func(l []byte) { o.Stream.Line(protocol.ClientToServer, l) })
		inW.Close()
	}()

	exited := make(chan struct{})
	var state *os.ProcessState
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		state = cmd.ProcessState
		close(exited)
	}()
	for done := false; !done; {
		select {
		case s := <-o.Signals:
			_ = cmd.Process.Signal(s)
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			ctx = context.Background()
		case <-exited:
			done = true
		}
	}
	// The output pipes end when every holder closes them; a grandchild
	// that inherited them may not, so reading stops after Drain.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(o.Drain):
		_ = outR.SetReadDeadline(time.Now())
		_ = errR.SetReadDeadline(time.Now())
		<-drained
	}
	outR.Close()
	errR.Close()
	if state == nil {
		return nil, waitErr
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return state, waitErr
	}
	return state, nil
}

// pump copies src to dst as it reads, and hands each complete line
// (without its newline, cut at max bytes) to line before writing the bytes
// on: the other side cannot answer a message before the recorder has
// heard of it, so the record keeps the order in which things happened. A
// write error (the reader went away) stops the copy; so does the end of
// src. A line left unterminated at the end is reported too.
func pump(src io.Reader, dst io.Writer, max int, line func([]byte)) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var pending []byte
	over := false
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			for len(chunk) > 0 {
				i := indexNL(chunk)
				part := chunk
				if i >= 0 {
					part = chunk[:i]
				}
				if !over {
					room := max + 1 - len(pending)
					if len(part) > room {
						pending = append(pending, part[:room]...)
						over = true
					} else {
						pending = append(pending, part...)
					}
				}
				if i < 0 {
					break
				}
				line(pending)
				pending, over = pending[:0], false
				chunk = chunk[i+1:]
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if len(pending) > 0 {
				line(pending)
			}
			return
		}
	}
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// ExitText says how a process ended, for the record: "exited with code 3",
// "killed by signal terminated".
func ExitText(s *os.ProcessState) string {
	if s == nil {
		return ""
	}
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exited with code %d", s.ExitCode())
}

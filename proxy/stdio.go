package proxy

import (
	"bytes"
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
	// Stream records the traffic; nil records nothing. The stream keeps
	// each line up to the recorder's MaxMessageSize, and a long one on
	// disk rather than in memory.
	Stream *capture.Stream
	// Signals, if not nil, delivers the signals to pass on to the server
	// (the CLI sends SIGINT, SIGTERM and SIGHUP).
	Signals <-chan os.Signal
	// Drain bounds how long the server's output is still read after the
	// server exited, for a grandchild that keeps it open. Zero means 2s.
	Drain time.Duration
	// Grace is how long a server is given to exit by itself once its
	// client has gone (a write to stdout failed: the client closed its
	// end): its stdin is closed at once, SIGTERM follows after Grace and
	// SIGKILL after Grace again. Zero means 2s.
	Grace time.Duration
}

// WrapResult is how a wrapped server ended.
type WrapResult struct {
	// State is the server's exit state.
	State *os.ProcessState
	// ClientGone is set when the client stopped reading the server's
	// output (a write to stdout failed). What the server wrote after that
	// was still read and recorded, though it reached no one.
	ClientGone bool
	// Ended says what Wrap did to end the server once its client had
	// gone: "" when the server exited by itself.
	Ended string
}

// Exit says how the server ended, for the record: ExitText of State, and
// why, when its client had gone.
func (r *WrapResult) Exit() string {
	if r == nil {
		return ""
	}
	s := ExitText(r.State)
	switch {
	case r.Ended != "":
		s += " (" + r.Ended + ")"
	case r.ClientGone:
		s += " (after its client had gone: the client closed its end of stdout)"
	}
	return s
}

// Wrap is the stdio leg: it starts cmd (its Path, Args, Env and Dir as the
// caller set them) and relays stdin to the server's stdin and the server's
// stdout and stderr to stdout and stderr, byte for byte and unbuffered:
// each read is written on at once, so a message reaches the other side as
// soon as its newline is read. The lines of each read are handed to the
// stream just before the read is forwarded (queued without waiting), so
// the record's order is the order things happened; recording never
// delays, alters or stops the relay. When stdin ends, the server's stdin
// is closed. When the client stops reading (a write to stdout fails, as
// when it has exited), the server's output is still read and recorded,
// and the server is ended (see WrapOptions.Grace). Wrap returns when the
// server has exited and its output is drained. For SIGPIPE not to end the
// caller's process when the client goes, the caller lets it through (the
// CLI does, with signal.Notify).
func Wrap(ctx context.Context, cmd *exec.Cmd, stdin io.Reader, stdout, stderr io.Writer, opts *WrapOptions) (*WrapResult, error) {
	var o WrapOptions
	if opts != nil {
		o = *opts
	}
	if o.Drain <= 0 {
		o.Drain = 2 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
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

	gone := make(chan struct{})
	var goneOnce sync.Once
	clientGone := func() { goneOnce.Do(func() { close(gone) }) }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		pump(outR, stdout, o.Stream.Writer(protocol.ServerToClient), clientGone)
	}()
	go func() {
		defer wg.Done()
		// A client that closed our stderr may still read stdout: the
		// server's stderr is then recorded only.
		pump(errR, stderr, o.Stream.StderrWriter(), func() {})
	}()
	// stdin: a blocking read of the client's pipe that may outlive the
	// server; it is not waited for.
	go func() {
		pump(stdin, inW, o.Stream.Writer(protocol.ClientToServer), nil)
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
	res := &WrapResult{}
	var grace <-chan time.Time
	var termed bool
	for done := false; !done; {
		select {
		case s := <-o.Signals:
			_ = cmd.Process.Signal(s)
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			ctx = context.Background()
		case <-gone:
			// Nobody reads the server any more: end it, the way a client
			// would, by closing its stdin first.
			gone = nil
			res.ClientGone = true
			_ = inW.Close()
			grace = time.After(o.Grace)
		case <-grace:
			if !termed {
				termed = true
				res.Ended = fmt.Sprintf("its client had gone (the client closed its end of stdout); mcptape closed the server's stdin, and sent SIGTERM when it had not exited %s later", o.Grace)
				_ = cmd.Process.Signal(syscall.SIGTERM)
				grace = time.After(o.Grace)
			} else {
				res.Ended = fmt.Sprintf("its client had gone (the client closed its end of stdout); mcptape closed the server's stdin, sent SIGTERM %s later and SIGKILL %s after that", o.Grace, o.Grace)
				_ = cmd.Process.Kill()
				grace = nil
			}
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
	res.State = state
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) {
		return res, waitErr
	}
	return res, nil
}

// pump copies src to dst as it reads. Before it writes a read on, it hands
// the read's lines (split at each newline, without it) to w and flushes,
// so that the other side cannot answer a message before the recorder has
// heard of it. A write error means the reader went away: with failed nil
// the copy stops; else failed is called and the copy goes on reading and
// recording, writing nothing more. The end of src ends it; a line left
// unterminated at the end is recorded too.
func pump(src io.Reader, dst io.Writer, w *capture.FrameWriter, failed func()) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	writing := true
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for chunk := buf[:n]; len(chunk) > 0; {
				i := bytes.IndexByte(chunk, '\n')
				if i < 0 {
					_, _ = w.Write(chunk)
					break
				}
				_, _ = w.Write(chunk[:i])
				w.End()
				chunk = chunk[i+1:]
			}
			w.Flush()
			if writing {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					if failed == nil {
						return
					}
					writing = false
					failed()
				}
			}
		}
		if err != nil {
			if w.Pending() {
				w.End()
				w.Flush()
			}
			return
		}
	}
}

// ExitText says how a process ended, for the record: "exited with code 3",
// "killed by signal terminated", "killed by signal segmentation fault
// (core dumped)".
func ExitText(s *os.ProcessState) string {
	if s == nil {
		return ""
	}
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t := "killed by signal " + ws.Signal().String()
		if ws.CoreDump() {
			t += " (core dumped)"
		}
		return t
	}
	return fmt.Sprintf("exited with code %d", s.ExitCode())
}

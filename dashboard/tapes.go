package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/mcptape/mcptape/capture"
)

// replayInfo is how to replay a session: export it as a tape, then serve
// the tape as a stand-in server.
type replayInfo struct {
	// Tape is the file name the commands use.
	Tape string `json:"tape"`
	// Export and Replay are the two commands; Command is both, joined
	// with &&, to paste into a shell.
	Export  string `json:"export"`
	Replay  string `json:"replay"`
	Command string `json:"command"`
	// CanStart says the dashboard can start the replay server itself
	// (POST /api/v1/sessions/{id}/replay), CanStop that it can stop one
	// (DELETE with ?url=).
	CanStart bool `json:"canStart"`
	CanStop  bool `json:"canStop"`
	// Running are the replay servers started for the session, by URL.
	Running []string `json:"running"`
}

// tapeName is a file name for a session's tape: the id with anything but
// letters, digits, '.', '_' and '-' replaced.
func tapeName(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := strings.TrimLeft(b.String(), ".")
	if name == "" {
		name = "session"
	}
	return name + ".tape.json"
}

// replayInfo is how to replay session x: a stdio server's session as a
// stdio server (a client config launches `mcptape replay server --stdio`),
// any other as an HTTP one.
func (s *Server) replayInfo(x *capture.Session) replayInfo {
	id := x.ID
	tape := tapeName(id)
	export := "mcptape export"
	if s.opts.DataDir != "" {
		export += " --data " + shellQuote(s.opts.DataDir)
	}
	export += " -o " + shellQuote(tape) + " " + shellQuote(id)
	replay := "mcptape replay server --tape " + shellQuote(tape)
	if x.Leg == capture.LegStdio {
		replay = "mcptape replay server --stdio --tape " + shellQuote(tape)
	}
	s.replayMu.Lock()
	running := append([]string{}, s.replays[id]...)
	s.replayMu.Unlock()
	return replayInfo{Tape: tape, Export: export, Replay: replay, Command: export + " && " + replay,
		CanStart: s.opts.Backend != nil, CanStop: s.opts.Backend != nil, Running: running}
}

func (s *Server) apiReplayInfo(w http.ResponseWriter, r *http.Request) {
	x, err := s.store.Session(r.Context(), pathVar(r, "id"))
	if err != nil {
		storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.replayInfo(x))
}

// apiStartReplay is POST /api/v1/sessions/{id}/replay: start a replay
// server for the session (with Options.Backend).
func (s *Server) apiStartReplay(w http.ResponseWriter, r *http.Request) {
	if s.opts.Backend == nil {
		writeError(w, http.StatusNotImplemented, "this dashboard cannot start replay servers: run the replay command instead", "unsupported")
		return
	}
	x, err := s.store.Session(r.Context(), pathVar(r, "id"))
	if err != nil {
		storeError(w, err)
		return
	}
	url, err := s.opts.Backend.StartReplay(s.ctx, x.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "starting the replay server: "+err.Error(), "internal")
		return
	}
	s.log.Info("dashboard: replay server started", logKeySession, x.ID, "url", url)
	s.replayMu.Lock()
	if s.replays == nil {
		s.replays = map[string][]string{}
	}
	s.replays[x.ID] = append(s.replays[x.ID], url)
	s.replayMu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"url": url})
}

// apiStopReplay is DELETE /api/v1/sessions/{id}/replay?url=URL: stop a
// replay server the dashboard started for the session.
func (s *Server) apiStopReplay(w http.ResponseWriter, r *http.Request) {
	if s.opts.Backend == nil {
		writeError(w, http.StatusNotImplemented, "this dashboard cannot stop replay servers: stop the replay command with Ctrl-C", "unsupported")
		return
	}
	id, url := pathVar(r, "id"), r.URL.Query().Get("url")
	s.replayMu.Lock()
	list := s.replays[id]
	i := slices.Index(list, url)
	s.replayMu.Unlock()
	if i < 0 {
		writeError(w, http.StatusNotFound, "no replay server this dashboard started for the session runs at "+url, "not_found")
		return
	}
	if err := s.opts.Backend.StopReplay(r.Context(), url); err != nil {
		writeError(w, http.StatusInternalServerError, "stopping the replay server: "+err.Error(), "internal")
		return
	}
	s.replayMu.Lock()
	s.replays[id] = slices.DeleteFunc(s.replays[id], func(u string) bool { return u == url })
	if len(s.replays[id]) == 0 {
		delete(s.replays, id)
	}
	s.replayMu.Unlock()
	s.log.Info("dashboard: replay server stopped", logKeySession, id, "url", url)
	w.WriteHeader(http.StatusNoContent)
}

// writeTracker notes whether a response has begun, so that a failure after
// it aborts the response instead of appending an error to half a file.
type writeTracker struct {
	http.ResponseWriter
	wrote bool
}

func (t *writeTracker) Write(p []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(p)
}

// download names the attachment a response is.
func download(w http.ResponseWriter, name, contentType string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
}

// apiExportTape is GET /api/v1/sessions/{id}/tape: the session as a tape
// file (docs/tape-format.md).
func (s *Server) apiExportTape(w http.ResponseWriter, r *http.Request) {
	if s.opts.Backend == nil {
		writeError(w, http.StatusNotImplemented, "tape export is not available in this dashboard", "unsupported")
		return
	}
	// An export right after a run holds all of it.
	if err := s.sync(r.Context()); err != nil {
		storeError(w, err)
		return
	}
	x, err := s.store.Session(r.Context(), pathVar(r, "id"))
	if err != nil {
		storeError(w, err)
		return
	}
	download(w, tapeName(x.ID), "application/json")
	t := &writeTracker{ResponseWriter: w}
	if err := s.opts.Backend.ExportTape(r.Context(), s.store, []string{x.ID}, t); err != nil {
		s.log.Warn("dashboard: tape export failed", logKeySession, x.ID, logKeyError, err)
		if t.wrote {
			panic(http.ErrAbortHandler)
		}
		w.Header().Del("Content-Disposition")
		storeError(w, err)
	}
}

// apiImportTape is POST /api/v1/tapes with a tape file as the body.
func (s *Server) apiImportTape(w http.ResponseWriter, r *http.Request) {
	if s.opts.Backend == nil {
		writeError(w, http.StatusNotImplemented, "tape import is not available in this dashboard", "unsupported")
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxImportBytes)
	ids, err := s.opts.Backend.ImportTape(r.Context(), s.store, body)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, "the tape is larger than this dashboard takes", "too_large")
		case errors.Is(err, capture.ErrClosed):
			storeError(w, err)
		default:
			// Mostly a tape that is not one: say why.
			badRequest(w, "importing the tape: "+err.Error())
		}
		return
	}
	if ids == nil {
		ids = []string{}
	}
	s.log.Info("dashboard: tape imported", "sessions", len(ids))
	writeJSON(w, http.StatusOK, map[string]any{"sessions": ids})
}

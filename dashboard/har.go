package dashboard

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/mcptape/mcptape/capture"
)

// apiExportHAR is GET /api/v1/sessions/{id}/har.
func (s *Server) apiExportHAR(w http.ResponseWriter, r *http.Request) {
	x, err := s.store.Session(r.Context(), pathVar(r, "id"))
	if err != nil {
		storeError(w, err)
		return
	}
	var b bytes.Buffer
	if err := capture.WriteHAR(r.Context(), s.store, &b, []*capture.Session{x}, s.opts.Version); err != nil {
		storeError(w, err)
		return
	}
	download(w, strings.TrimSuffix(tapeName(x.ID), ".tape.json")+".har", "application/json")
	_, _ = w.Write(b.Bytes())
}

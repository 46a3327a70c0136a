package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/mcptape/mcptape/capture"
)

// apiError is the body of every API error.
type apiError struct {
	Error string `json:"error"`
	// Code names the class of error: not_found, bad_request, csrf,
	// origin, host, token, unsupported, conflict, internal.
	Code string `json:"code"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(true) // belt and braces: recorded text never reads as markup
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg, kind string) {
	writeJSON(w, code, apiError{Error: msg, Code: kind})
}

// storeError answers a store error: 404 for ErrNotFound, 400 for
// ErrInvalidEdit, 503 for ErrClosed.
func storeError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, capture.ErrNotFound):
		writeError(w, http.StatusNotFound, notFoundMessage(err), "not_found")
	case errors.Is(err, capture.ErrInvalidEdit):
		writeError(w, http.StatusBadRequest, err.Error(), "bad_request")
	case errors.Is(err, capture.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, "The store is closed: mcptape is stopping. Start it again (mcptape record or mcptape dashboard), then reload.", "closed")
	default:
		writeError(w, http.StatusInternalServerError, err.Error(), "internal")
	}
}

func badRequest(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, msg, "bad_request")
}

// jsonErrors marks API answers as not cacheable.
func jsonErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// pathVar is a path variable, unescaped (the router matches escaped paths).
func pathVar(r *http.Request, name string) string {
	v := mux.Vars(r)[name]
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

func seqVar(r *http.Request) (uint64, bool) {
	n, err := strconv.ParseUint(mux.Vars(r)["seq"], 10, 64)
	return n, err == nil
}

// readJSON decodes a request body of at most limit bytes into v.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		badRequest(w, "reading the request body: "+err.Error())
		return false
	}
	return true
}

package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcptape/mcptape/protocol"
)

// The security model (see the package documentation): the page is served
// with a strict Content-Security-Policy; on a loopback listener the Host
// must be a loopback name (DNS rebinding); a token guards every dashboard,
// on loopback too (Jupyter's rule: other local users reach loopback); every
// request that changes something carries the CSRF token of a double-submit
// cookie in a header and comes from the dashboard's own origin.

// ContentSecurityPolicy is sent with every response: no inline script or
// style, nothing from elsewhere, images and audio also from data: URLs
// (media content blocks), no plugins, no framing.
const ContentSecurityPolicy = "default-src 'self'; img-src 'self' data:; media-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// Cookie and header names.
const (
	csrfCookie  = "mcptape_csrf"
	csrfHeader  = "X-CSRF-Token"
	tokenCookie = "mcptape_token"
	tokenParam  = "token"
)

// NewToken returns a random token for Options.Token.
func NewToken() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func isMutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// guard wraps the router with the checks every request goes through.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")

		if !protocol.HostAllowed(r) {
			refuse(w, r, http.StatusForbidden, "the Host header names no loopback host, on a loopback listener (DNS rebinding?)", "host")
			return
		}
		// Always, on loopback too: every user of the machine reaches it.
		switch ok, fromURL := s.tokenOK(r); {
		case ok && fromURL:
			// Trade the token in the URL for a cookie, and take it out of
			// the address bar (and so of history and bookmarks).
			http.SetCookie(w, &http.Cookie{Name: tokenCookieName(r), Value: s.opts.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del(tokenParam)
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		case !ok:
			refuse(w, r, http.StatusUnauthorized, "this dashboard needs its token: open the URL mcptape printed (…/?token=…), or send Authorization: Bearer TOKEN", "token")
			return
		}
		csrf := ""
		if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 32 {
			csrf = c.Value
		} else {
			csrf = NewToken()
			http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: "/", SameSite: http.SameSiteStrictMode})
		}
		if isMutating(r.Method) {
			if msg := sameOrigin(r); msg != "" {
				refuse(w, r, http.StatusForbidden, msg, "origin")
				return
			}
			got := r.Header.Get(csrfHeader)
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1 {
				refuse(w, r, http.StatusForbidden, "missing or wrong CSRF token: send the mcptape_csrf cookie's value in the X-CSRF-Token header", "csrf")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// tokenOK reports whether r carries the token, and whether in the URL.
func (s *Server) tokenOK(r *http.Request) (ok, fromURL bool) {
	want := []byte(s.opts.Token)
	eq := func(v string) bool { return v != "" && subtle.ConstantTimeCompare([]byte(v), want) == 1 }
	if c, err := r.Cookie(tokenCookieName(r)); err == nil && eq(c.Value) {
		return true, false
	}
	if v, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && eq(v) {
		return true, false
	}
	if r.Method == http.MethodGet && eq(r.URL.Query().Get(tokenParam)) {
		return true, true
	}
	return false, false
}

// tokenCookieName is the token cookie's name for the listener r came in
// on. Browsers keep cookies per host, not per port: two dashboards on
// 127.0.0.1 (a recorder's and a replay client's) would otherwise overwrite
// each other's cookie, as Jupyter's servers would without their port in
// the name.
func tokenCookieName(r *http.Request) string {
	port := ""
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		_, port, _ = net.SplitHostPort(local.String())
	}
	if port == "" {
		_, port, _ = net.SplitHostPort(r.Host)
	}
	if port == "" {
		return tokenCookie
	}
	return tokenCookie + "_" + port
}

// sameOrigin returns why a mutating request is not from the dashboard's
// own pages, or "". Browsers send Sec-Fetch-Site and Origin with every
// such request; a client that sends neither (curl, a script) still needs
// the CSRF cookie and header.
func sameOrigin(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "a request from another site (Sec-Fetch-Site: " + site + ") may not change anything"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || o == "null" || !strings.EqualFold(u.Host, r.Host) || (u.Scheme != "http" && u.Scheme != "https") {
			return "a request from another origin (" + o + ") may not change anything"
		}
	}
	return ""
}

// refuse answers a refused request: JSON for the API, text otherwise.
func refuse(w http.ResponseWriter, r *http.Request, code int, msg, kind string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeError(w, code, msg, kind)
		return
	}
	http.Error(w, msg, code)
}

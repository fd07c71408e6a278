package devidp

import (
	_ "embed"
	"errors"
	"html/template"
	"net/http"

	"github.com/zitadel/oidc/v3/pkg/op"
)

// The login UI is plain HTML plus one same-origin stylesheet: no inline
// script or style, so it works under Content-Security-Policy default-src 'self'.
var (
	//go:embed login.html
	loginHTML string
	//go:embed devidp.css
	css   []byte
	pages = template.Must(template.New("").Parse(loginHTML))
)

// pageData feeds login.html.
type pageData struct {
	Title, CSS, Action  string
	ID, Username, Error string
	Users               []User
}

func (p *Provider) page(title string) pageData {
	return pageData{Title: title, CSS: p.issuer + pathCSS, Action: p.issuer + pathLogin}
}

// loginPage is where the op's authorize endpoint sends the browser
// (client.LoginURL), with the auth request id in authRequestID.
func (p *Provider) loginPage(w http.ResponseWriter, r *http.Request) {
	d := p.page("Sign in")
	d.ID = r.URL.Query().Get("authRequestID")
	status := http.StatusOK
	if !p.store.knownRequest(d.ID) {
		d.ID, d.Error, status = "", errUnknownRequest.Error(), http.StatusBadRequest
	}
	d.Users = p.store.users
	render(w, status, "login", d)
}

// loginSubmit checks the credentials, marks the auth request done and hands
// the browser back to the op's callback, which issues the code and redirects
// to the client. Failures re-render the form without any redirect.
func (p *Provider) loginSubmit(w http.ResponseWriter, r *http.Request) {
	id, username := r.PostFormValue("id"), r.PostFormValue("username")
	sub, err := p.store.checkLogin(id, username, r.PostFormValue("password"))
	if err != nil {
		d := p.page("Sign in")
		d.Error, d.Users = err.Error(), p.store.users
		status := http.StatusUnauthorized
		if errors.Is(err, errUnknownRequest) {
			status = http.StatusBadRequest
		} else {
			d.ID, d.Username = id, username
		}
		// The typed username is not logged: it may be a mistyped password.
		p.log.Warn("devidp sign-in failed", "reason", err.Error())
		render(w, status, "login", d)
		return
	}
	p.log.Info("devidp sign-in", "sub", sub)
	// AuthCallbackURL reads the issuer from the context, which the op's
	// router sets for its own routes but not for ours.
	ctx := op.ContextWithIssuer(r.Context(), p.issuer)
	// 303 turns the POST into a GET on the callback.
	http.Redirect(w, r, op.AuthCallbackURL(p.op)(ctx, id), http.StatusSeeOther)
}

// loggedOutPage is the op's DefaultLogoutRedirectURI: end_session lands here
// when no registered post_logout_redirect_uri was requested.
func (p *Provider) loggedOutPage(w http.ResponseWriter, _ *http.Request) {
	render(w, http.StatusOK, "signed-out", p.page("Signed out"))
}

func render(w http.ResponseWriter, status int, name string, d pageData) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// Same policy the app enforces; also forbids framing the login form.
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, name, d) // headers are sent; nothing left to report to
}

func serveCSS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(css)
}

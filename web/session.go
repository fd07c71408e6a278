package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers"
	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/idempotency"
	"gantry/models/org"
	"gantry/models/session"
	"gantry/views"
	"gantry/views/paths"
)

// requestSession is the session of one request, if the browser has a live one.
type requestSession struct {
	sess   session.Session
	found  bool
	looked bool // the cookie was looked up (findSession)
}

const sessionKey = "gantry.session"

func sessionOf(c echo.Context) *requestSession {
	rs, _ := c.Get(sessionKey).(*requestSession)
	if rs == nil {
		rs = &requestSession{}
		c.Set(sessionKey, rs)
	}
	return rs
}

func (s *Server) cookieName() string {
	if s.secureCookies() {
		return "__Host-gantry_session" // __Host-: Secure, Path=/, no Domain: cannot be planted by a subdomain
	}
	return "gantry_session"
}

func (s *Server) secureCookies() bool { return strings.HasPrefix(s.cfg.BaseURL, "https://") }

func (s *Server) setSessionCookie(c echo.Context, token string) {
	c.SetCookie(&http.Cookie{
		Name: s.cookieName(), Value: token, Path: "/", HttpOnly: true,
		Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

func (s *Server) clearSessionCookie(c echo.Context) {
	c.SetCookie(&http.Cookie{
		Name: s.cookieName(), Value: "", Path: "/", HttpOnly: true, MaxAge: -1,
		Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode,
	})
}

// loadSession finds the browser's session (if any) and sets up the page chrome that
// every page, even an error page, renders with. What it answers depends on who is
// signed in, so no cache may keep it: Cache-Control: no-store, set as the answer is
// written so that it holds for every handler and error page of the session routes.
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if viaToken(c) {
			return next(c) // the token is the whole authentication: no session, no cookie
		}
		res := c.Response()
		res.Before(func() { res.Header().Set(echo.HeaderCacheControl, "no-store") })
		rs, err := s.findSession(c)
		if err != nil {
			return err
		}
		if rs.found {
			render.SetFlasher(c, func(kind, message string) error {
				f := session.Flash{Kind: kind, Message: message}
				// A replayed request (same idempotency key) queues its flash again: say it once.
				if slices.Contains(rs.sess.Data.Flashes, f) {
					return nil
				}
				rs.sess.Data.Flashes = append(rs.sess.Data.Flashes, f)
				return s.sessions.SaveData(c.Request().Context(), rs.sess)
			})
		}
		s.setChrome(c, func(ch *views.Chrome) { ch.CSRFToken = maskCSRF(rs.sess.CSRFToken) })
		return next(c)
	}
}

// findSession loads the session the browser's cookie names, once per request; an
// unknown or ended one clears the cookie.
func (s *Server) findSession(c echo.Context) (*requestSession, error) {
	rs := sessionOf(c)
	if rs.looked {
		return rs, nil
	}
	rs.looked = true
	cookie, err := c.Cookie(s.cookieName())
	if err != nil {
		return rs, nil
	}
	sess, err := s.sessions.Load(c.Request().Context(), cookie.Value)
	switch {
	case err == nil:
		rs.sess, rs.found = sess, true
	case errors.Is(err, errs.ErrNotFound):
		s.clearSessionCookie(c)
	default:
		return nil, err
	}
	return rs, nil
}

// setChrome edits the page chrome carried by the request context.
func (s *Server) setChrome(c echo.Context, edit func(*views.Chrome)) {
	req := c.Request()
	ch := views.ChromeFrom(req.Context())
	ch.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	ch.Path = req.URL.Path
	ch.FormKey = idempotency.NewKey
	edit(&ch)
	c.SetRequest(req.WithContext(views.WithChrome(req.Context(), ch)))
}

// checkCSRF refuses every state-changing request that does not carry the session's
// CSRF token, in the form field _csrf or the X-CSRF-Token header (htmx, API).
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if methodNeedsNoCSRF(c.Request().Method) || viaToken(c) {
			return next(c)
		}
		rs := sessionOf(c)
		sent := c.Request().Header.Get("X-CSRF-Token")
		if sent == "" && !strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationJSON) {
			sent = c.FormValue("_csrf")
		}
		if !rs.found || !csrfMatches(sent, rs.sess.CSRFToken) {
			return echo.NewHTTPError(http.StatusForbidden, "The form was missing its security token or it has expired. Reload the page and try again.")
		}
		return next(c)
	}
}

// requireMember lets through only a signed-in user, acting in one organization they
// belong to, and puts that subject into the request context for the services.
func (s *Server) requireMember(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if viaToken(c) {
			return next(c) // the token's holder is a member: Authenticate checked it
		}
		ctx := c.Request().Context()
		rs := sessionOf(c)
		if !rs.found || !rs.sess.SignedIn() {
			if c.Request().Method == http.MethodGet && !render.WantsJSON(c) && c.Request().Header.Get("HX-Request") == "" {
				return c.Redirect(http.StatusFound, paths.LoginReturning(c.Request().URL.RequestURI()))
			}
			return errs.ErrUnauthenticated
		}
		m, err := s.memberOf(ctx, rs)
		if err != nil {
			return err
		}
		if len(m.memberships) == 0 {
			s.setChrome(c, m.fill)
			return render.Page(c, http.StatusForbidden, views.NoOrganization(handlers.SignInClaims(m.user.LastSignIn)))
		}
		c.SetRequest(c.Request().WithContext(authz.WithSubject(c.Request().Context(), m.subject)))
		flashes, err := s.popFlashes(c, rs)
		if err != nil {
			return err
		}
		// The navigation's count of runs waiting for this person, on full pages only.
		var waiting int64
		page := c.Request().Method == http.MethodGet && !render.WantsJSON(c) && c.Request().Header.Get("HX-Request") == ""
		if page && m.subject.Can(authz.PermProvisioningApply) {
			if waiting, err = s.inbox.CountWaitingForYou(c.Request().Context()); err != nil {
				return err
			}
		}
		s.setChrome(c, func(ch *views.Chrome) {
			m.fill(ch)
			ch.Flashes = flashes
			ch.WaitingForYou = waiting
			if page && ch.CanApprove {
				ch.Stream = paths.InboxEvents()
			}
		})
		return next(c)
	}
}

// member is the signed-in user of a session with their memberships and, when they have
// any, the subject acting in the current organization.
type member struct {
	user        org.User
	memberships []orgMembership
	subject     authz.Subject
}

// memberOf reads who the signed-in session rs belongs to.
func (s *Server) memberOf(ctx context.Context, rs *requestSession) (member, error) {
	user, err := s.orgs.User(ctx, *rs.sess.UserID)
	if err != nil {
		return member{}, fmt.Errorf("loading signed-in user: %w", err)
	}
	memberships, err := s.orgs.MembershipsOf(ctx, user.ID)
	if err != nil {
		return member{}, err
	}
	m := member{user: user, memberships: memberships}
	if len(memberships) == 0 {
		return m, nil
	}
	current := memberships[0]
	if rs.sess.OrganizationID != nil {
		if i := slices.IndexFunc(memberships, func(m orgMembership) bool { return m.OrganizationID == *rs.sess.OrganizationID }); i >= 0 {
			current = memberships[i]
		}
	}
	m.subject = authz.Subject{UserID: user.ID, Name: user.DisplayName(), OrganizationID: current.OrganizationID, Role: current.Role}
	// When the provider authenticated the person, as its ID token said; a sign-in whose
	// token did not say is never fresh (zero), whenever the session began.
	if at := rs.sess.Data.AuthTime; at != nil {
		m.subject.AuthenticatedAt = *at
	}
	return m, nil
}

// fill puts the member into the page chrome: who is signed in, the organizations to
// switch between, and what the navigation offers.
func (m member) fill(ch *views.Chrome) {
	ch.SignedIn, ch.UserName, ch.UserEmail = true, m.user.DisplayName(), m.user.Email
	if len(m.memberships) == 0 {
		return
	}
	ch.Org = views.OrgChoice{ID: m.subject.OrganizationID, Role: string(m.subject.Role)}
	ch.Orgs = make([]views.OrgChoice, 0, len(m.memberships))
	for _, o := range m.memberships {
		if o.OrganizationID == m.subject.OrganizationID {
			ch.Org.Name = o.OrganizationName
		}
		ch.Orgs = append(ch.Orgs, views.OrgChoice{ID: o.OrganizationID, Name: o.OrganizationName, Role: string(o.Role)})
	}
	ch.CanManageEnvs = m.subject.Can(authz.PermEnvironmentsManage)
	ch.CanManageWebhooks = m.subject.Can(authz.PermWebhooksManage)
	ch.CanReadAudit = m.subject.Can(authz.PermAuditRead)
	ch.CanRequest = m.subject.Can(authz.PermProvisioningPlan)
	ch.CanApprove = m.subject.Can(authz.PermProvisioningApply)
	// The governance service reads its report for those holding audit.read
	// (governance.Service.Report); the break-glass service lists windows to every
	// member (breakglass.Service.Recent), hiding those of environments they may not see.
	ch.CanReadGovernance = m.subject.Can(authz.PermAuditRead)
	ch.CanBreakglass = m.subject.Can(authz.PermOrgRead)
}

// popFlashes takes the queued flash messages for a full page view (not for htmx
// fragments or API calls, which would swallow them unseen).
func (s *Server) popFlashes(c echo.Context, rs *requestSession) ([]views.Flash, error) {
	if c.Request().Method != http.MethodGet || c.Request().Header.Get("HX-Request") != "" || render.WantsJSON(c) || len(rs.sess.Data.Flashes) == 0 {
		return nil, nil
	}
	out := make([]views.Flash, 0, len(rs.sess.Data.Flashes))
	for _, f := range rs.sess.Data.Flashes {
		out = append(out, views.Flash{Kind: f.Kind, Message: f.Message})
	}
	rs.sess.Data.Flashes = nil
	return out, s.sessions.SaveData(c.Request().Context(), rs.sess)
}

// switchOrg makes another of the user's organizations the current one.
func (s *Server) switchOrg(c echo.Context) error {
	ctx := c.Request().Context()
	rs := sessionOf(c)
	memberships, err := s.orgs.MembershipsOf(ctx, *rs.sess.UserID)
	if err != nil {
		return err
	}
	want := c.FormValue("organization_id")
	i := slices.IndexFunc(memberships, func(m orgMembership) bool { return m.OrganizationID == want })
	if i < 0 {
		return fmt.Errorf("organization %q: %w", want, errs.ErrNotFound)
	}
	if err := s.sessions.SetOrganization(ctx, rs.sess, want); err != nil {
		return err
	}
	rs.sess.OrganizationID = &want
	_ = render.Flash(c, "info", "Switched to "+memberships[i].OrganizationName+".")
	return render.Redirect(c, paths.Home())
}

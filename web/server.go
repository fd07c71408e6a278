// Package web assembles Gantry's HTTP server: echo with its middleware (request ids,
// JSON access logs, recover, security headers, sessions, OIDC login, CSRF), the central
// error handler and the routes of every handler group.
package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	scimapi "gantry/handlers/scim"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"gantry/handlers"
	"gantry/views"

	"gantry/handlers/openapi"
	"gantry/models/audit"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/org"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/models/session"
	"gantry/models/workspace"
	"gantry/static"
	"gantry/telemetry"
	"gantry/views/paths"
	"gantry/web/devmail"
)

// Server is the assembled HTTP application.
type Server struct {
	Echo *echo.Echo
	// Changes fans run changes out to live pages; run it with Changes.Run.
	Changes  *Changes
	cfg      Config
	ready    func(ctx context.Context) error
	sessions *session.Store
	orgs     *org.Service
	// groupRules admit, change and end the memberships group rules make, at sign-in.
	groupRules *org.GroupRules
	// eligibility keeps who may decide a waiting run true at sign-in; inbox counts
	// what waits for the person, for the navigation.
	eligibility *run.Eligibility
	inbox       *run.Inbox
	audit       *audit.Log
	auth        *authenticator
	tokens      TokenAuthenticator
	keys        IdempotencyKeys
	metrics     *telemetry.Metrics
	// limiter holds the rate limits' buckets; limitedOps are the rate-limited API routes;
	// refusals remember which addresses a failure limit refuses (failures.go).
	limiter    RateLimiter
	limitedOps map[string]bool
	refusals   *refusals
	// loginKeys seal the sign-in cookie (loginflow.go).
	loginKeys LoginSealer
	// api collects the JSON API's operations: /api/v1/openapi.json describes them.
	api    *openapi.Spec
	apiDoc func() ([]byte, error) // built once, on first use, from api
}

// New builds the server on svc. It discovers the OpenID Provider, so the provider must
// answer.
func New(ctx context.Context, cfg Config, svc Services) (*Server, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	if svc.Sessions == nil || svc.Orgs == nil || svc.Audit == nil || svc.Runs == nil || svc.Breakglass == nil || svc.Ready == nil || svc.LoginKeys == nil || svc.Limiter == nil {
		return nil, errors.New("web: Sessions, Orgs, Audit, Runs, Breakglass, Ready, LoginKeys and Limiter are required")
	}
	s := &Server{
		Echo:        echo.New(),
		cfg:         cfg,
		ready:       svc.Ready,
		sessions:    svc.Sessions,
		orgs:        svc.Orgs,
		groupRules:  svc.GroupRules,
		eligibility: svc.Runs.Eligibility,
		inbox:       svc.Runs.Inbox,
		audit:       svc.Audit,
		Changes:     NewChanges(svc.ListenPool, cfg.Logger),
		limiter:     svc.Limiter,
		refusals:    newRefusals(cfg.RateLimits.Now, maxRefusals),
		loginKeys:   svc.LoginKeys,
	}
	if svc.Tokens != nil {
		s.tokens = svc.Tokens
	}
	if svc.Keys != nil {
		s.keys = svc.Keys
	}
	s.metrics = svc.Metrics
	auth, err := newAuthenticator(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.auth = auth

	e := s.Echo
	e.HideBanner, e.HidePort = true, true
	// The client's address: what a trusted proxy forwarded, never any header (ratelimit.go).
	if e.IPExtractor, err = ipExtractor(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestID())
	e.Use(logRequestID)
	e.Use(s.observe)
	e.Use(s.accessLog())
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{DisableStackAll: true, DisablePrintStack: true}))
	e.Use(secureHeaders)
	e.Use(refuseBadInput) // bad bytes and broken bodies are a 400 before anything reads them (edge.go)
	// State bodies can be large; the state handler caps them itself.
	e.Use(middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: fmt.Sprint(maxBodyBytes),
		Skipper: func(c echo.Context) bool { return strings.HasPrefix(c.Request().URL.Path, "/state/") }}))

	// Stylesheet, scripts and icons: public, the same for everyone, outside the session.
	e.Match([]string{http.MethodGet, http.MethodHead}, paths.RouteStatic, serveAssets(static.Embedded()))
	e.GET(paths.Healthz(), func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET(paths.Readyz(), s.readyz)
	// The API's description is public: it holds no data, only the shape of the calls.
	s.api = &openapi.Spec{}
	s.api.Route(e.Group(""), openapi.Op{Method: http.MethodGet, Path: paths.APIDocument(), ID: "getOpenAPI", Tag: "meta", Scope: "none",
		Summary: "This description (OpenAPI 3.1)", ContentType: "application/json"}, s.openAPI)
	if svc.State != nil {
		// The OpenTofu http backend: job credentials (Basic auth), no session or CSRF.
		handlers.State{Backend: svc.State}.Register(e.Group(""))
	}
	if svc.Identity != nil {
		// The workload identity issuer's public half: clouds that trust Gantry's workload
		// tokens fetch discovery and keys, and ask whether a token is live, here.
		handlers.Workload{Issuer: svc.Identity}.Register(e.Group(""))
	}

	if svc.SCIM != nil {
		// SCIM 2.0 for directories: each organization's bearer token, no session or CSRF.
		if err := (scimapi.Endpoints{Directory: svc.SCIM, Logger: cfg.Logger}).Register(e.Group("")); err != nil {
			return nil, err
		}
	}

	// Everything below has a session and CSRF protection.
	web := e.Group("", s.bearer, s.loadSession, s.checkCSRF)
	// Starting a sign-in writes nothing and is not limited; a return from the provider
	// that signs no one in counts against its address (failures.go).
	web.GET(paths.Login(), s.login)
	web.GET(paths.Callback(), s.callback, s.limitFailedSignIns)
	web.POST(paths.Logout(), s.logout)
	web.GET(paths.SignedOut(), s.signedOut)

	// Everything below needs a signed-in member of an organization. Decisions are rate
	// limited first; every mutating request takes effect once (idempotency keys).
	app := web.Group("", s.requireMember, s.limitDecisions, s.idempotent)
	app.POST(paths.SwitchOrg(), s.switchOrg)
	names := auditNames{environments: svc.Environments, workspaces: svc.Workspaces, orgs: svc.Orgs, catalog: svc.Catalog}
	runs := svc.Runs
	auditPages := pages.Audit{Log: svc.Audit, Exports: svc.Exports, Keys: svc.AuditKeys, Names: names, Workspaces: svc.Workspaces, Runs: runs.Reads,
		Members: svc.Orgs}
	handlers.Dashboard{Pages: pages.Dashboard{Environments: svc.Environments, Clock: runs.Reads, Inbox: runs.Inbox, Mine: runs.Reads,
		Windows: svc.Breakglass, Workspaces: svc.Workspaces, Audit: auditPages, Runs: runs.Reads, Governance: svc.Governance}}.Register(app)
	envPages := pages.Environments{Service: svc.Environments, Members: svc.Orgs, Credentials: svc.Credentials}
	handlers.Environments{Pages: envPages}.Register(app)
	handlers.EnvironmentsAPI{Pages: envPages}.Register(app, s.api)
	handlers.Members{Pages: pages.Members{Members: svc.Members, Environments: svc.Environments, Rules: svc.GroupRules}, Members: svc.Members,
		Environments: svc.Environments, Rules: svc.GroupRules}.Register(app)
	handlers.Matrix{Store: svc.Matrix, Saves: pages.Matrix{Store: svc.Matrix}}.Register(app)
	policyPages := pages.Policies{Store: svc.Policies, Environments: svc.Environments}
	handlers.Policies{Pages: policyPages, Store: svc.Policies}.Register(app)
	handlers.Catalog{Pages: pages.Catalog{Catalog: svc.Catalog}}.Register(app)
	forms := pages.Requests{Catalog: svc.Catalog, Runs: runs.Requests, Previews: svc.Previews, Environments: svc.Environments,
		Workspaces: svc.Workspaces, History: runs.Reads, States: svc.State}
	requests := handlers.Requests{Forms: forms, Runs: runs.Requests, Previews: svc.Previews}
	requests.Register(app)
	runReads := pages.Runs{Runs: runs.Reads, Decisions: runs.Decisions, Workspaces: svc.Workspaces}
	if svc.Executors != nil {
		runReads.Executors = svc.Executors
	}
	reviews := pages.Reviews{Runs: runs.Reads, Decisions: runs.Decisions, Plans: runs.Reads, Workspaces: svc.Workspaces, Rollbacks: svc.Rollbacks,
		Inbox: runs.Inbox}
	handlers.Runs{Pages: runReads, Runs: runs.Reads, Inbox: runs.Inbox, Reviews: reviews, Changes: s.Changes, Heartbeat: 20 * time.Second,
		InboxPages: pages.Inbox{Inbox: runs.Inbox, Clock: runs.Reads, Workspaces: svc.Workspaces, Names: names, Emergencies: svc.Breakglass}}.Register(app)
	workspacePages := pages.Workspaces{Workspaces: svc.Workspaces, Runs: runs.Reads, States: svc.State, Names: names,
		Catalog: svc.Catalog, Drift: runs.DriftChecks, Windows: svc.Breakglass}
	handlers.Workspaces{Pages: workspacePages}.Register(app)
	handlers.Breakglass{Pages: pages.Breakglass{Windows: svc.Breakglass, Workspaces: svc.Workspaces, Runs: runs.Reads}}.Register(app)
	changes := pages.Changes{Workspaces: svc.Workspaces, Runs: runs.Reads, Drift: runs.DriftChecks, Rollbacks: svc.Rollbacks, States: svc.State,
		Catalog: svc.Catalog}
	handlers.Drift{Changes: changes}.Register(app)
	handlers.Rollbacks{Changes: changes}.Register(app)
	handlers.Promotions{Forms: pages.Promotions{Workspaces: svc.Workspaces, Runs: svc.Promotions, Catalog: svc.Catalog}}.Register(app)
	handlers.RunList{Pages: pages.RunList{Runs: runs.Reads, Workspaces: svc.Workspaces, Names: names}}.Register(app)
	evidenceReports := pages.Evidence{Runs: runs.Reads, Reports: svc.Evidence}
	handlers.Evidence{Reports: evidenceReports}.Register(app)
	handlers.Governance{Reports: svc.Governance}.Register(app)
	auditHandler := handlers.Audit{Pages: auditPages, Exports: svc.Exports, Keys: svc.AuditKeys, Heartbeat: 20 * time.Second}
	auditHandler.Register(app)
	auditHandler.RegisterAPI(app, s.api)
	handlers.API{Requests: requests, Catalog: svc.Catalog, Environments: svc.Environments, Pages: runReads, Runs: runs.Reads, Decisions: runs.Decisions, Reviews: reviews, Search: runs.Reads, Reports: evidenceReports,
		Workspaces: svc.Workspaces, WorkspacePages: workspacePages, Policies: svc.Policies, PolicyPages: policyPages, Matrix: svc.Matrix, WorkspaceChanges: changes,
		Changes: s.Changes, Heartbeat: 20 * time.Second, Archiver: svc.Archiver, GroupRules: svc.GroupRules}.Register(app, s.api)
	handlers.WorkspaceArchive{Archiver: svc.Archiver}.Register(app)
	handlers.APIReference{Spec: s.api}.Register(app)
	if svc.Executors != nil {
		handlers.Executors{Runners: svc.Executors}.Register(app)
	}
	handlers.Notifications{Service: svc.Notifications, Pages: pages.Webhooks{Service: svc.Notifications}, MailConfigured: svc.MailConfigured}.Register(app)
	if svc.Tokens != nil {
		handlers.Tokens{Pages: pages.Tokens{Tokens: svc.Tokens, Members: svc.Members}, Tokens: svc.Tokens}.Register(app)
	}
	if svc.SCIMTokens != nil {
		handlers.SCIMToken{Pages: pages.SCIM{Tokens: svc.SCIMTokens, BaseURL: cfg.BaseURL + paths.SCIMBase()}}.Register(app)
	}
	if cfg.DevMail != nil {
		handlers.DevMail{Mailbox: mailbox{cfg.DevMail}}.Register(app)
	}
	s.limitedOps = rateLimitedRoutes(s.api.Ops())
	// Built on first use: every operation is registered by now.
	s.apiDoc = sync.OnceValues(func() ([]byte, error) { return s.api.Document("1") })
	return s, nil
}

// openAPI serves the API's description, built once from the registered operations.
func (s *Server) openAPI(c echo.Context) error {
	doc, err := s.apiDoc()
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
}

// readyz answers 200 when the database answers.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.ready(ctx); err != nil {
		return c.String(http.StatusServiceUnavailable, "database unavailable")
	}
	return c.String(http.StatusOK, "ready")
}

// contentSecurityPolicy forbids inline script and style and anything not from Gantry
// itself; form-action keeps forms from posting anywhere else.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

func secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		if c.Scheme() == "https" {
			h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		}
		return next(c)
	}
}

// StateOnly serves only the state backend's routes of h: the handler behind the socket
// that runc jobs reach, which must expose nothing else of Gantry.
func StateOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if !strings.HasPrefix(p, "/state/") || path.Clean(p) != p {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// auditNames resolves the ids of audit events through the services that own them.
type auditNames struct {
	environments *environment.Service
	workspaces   *workspace.Service
	orgs         *org.Service
	catalog      *catalog.Catalog
}

// TemplateNames are the catalog's templates by name (what lists filter by).
func (n auditNames) TemplateNames() []string {
	var out []string
	for _, e := range n.catalog.All() {
		out = append(out, e.Template.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (n auditNames) EnvironmentNames(ctx context.Context) (map[string]string, error) {
	return n.environments.Names(ctx)
}

func (n auditNames) WorkspaceNames(ctx context.Context, ids []string) (map[string]string, error) {
	return n.workspaces.Names(ctx, ids)
}

func (n auditNames) MemberNames(ctx context.Context) (map[string]string, error) {
	members, err := n.orgs.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(members))
	for _, m := range members {
		out[m.UserID] = cmp.Or(m.UserName, m.UserEmail)
	}
	return out, nil
}

// mailbox reads gantry dev's SMTP catcher for the caught-mail page.
type mailbox struct{ c *devmail.Catcher }

func (m mailbox) Caught() (string, []views.DevMailRow) {
	var rows []views.DevMailRow
	for _, msg := range m.c.Messages() {
		rows = append(rows, views.DevMailRow{ID: msg.ID, At: msg.At, From: msg.From, To: strings.Join(msg.To, ", "),
			Subject: msg.Subject, Text: msg.Text, Event: msg.Headers["X-Gantry-Event"]})
	}
	return m.c.Addr(), rows
}

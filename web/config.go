package web

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	scimapi "gantry/handlers/scim"

	"github.com/jackc/pgx/v5/pgxpool"

	"gantry/handlers"
	"gantry/models/apitoken"
	"gantry/models/audit"
	"gantry/models/breakglass"
	"gantry/models/catalog"
	"gantry/models/environment"
	"gantry/models/evidence"
	"gantry/models/identity"
	"gantry/models/org"
	"gantry/models/pages"
	"gantry/models/policy"
	"gantry/models/promotion"
	"gantry/models/risk"
	"gantry/models/rollback"
	"gantry/models/run"
	"gantry/models/session"
	"gantry/models/state"
	"gantry/models/workspace"
	"gantry/telemetry"
	"gantry/views/paths"
	"gantry/web/devmail"
)

// Config is everything the web layer is told from outside.
type Config struct {
	// BaseURL is the public URL people reach Gantry at, e.g. https://gantry.example.com.
	// Cookies are Secure (and __Host- prefixed) when it is https.
	BaseURL string
	// OIDC relying-party settings.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL defaults to BaseURL + /auth/callback.
	RedirectURL string
	// GroupsClaim names the ID token's (or UserInfo's) claim holding the person's
	// groups; empty: "groups".
	GroupsClaim string
	// VerifiedDomains are the Issuer's trusted e-mail domains: an address there counts
	// as verified when the provider sends no email_verified at all (models/signin).
	VerifiedDomains []string
	// SessionIdle ends a session unused this long; SessionLifetime ends any session.
	SessionIdle     time.Duration
	SessionLifetime time.Duration
	Logger          *slog.Logger
	// DevMail is gantry dev's SMTP catcher, whose mail /dev/mail shows (nil in serve).
	DevMail *devmail.Catcher

	// RateLimits bound signing in and deciding (ratelimit.go).
	RateLimits RateLimits
	// TrustedProxies are the networks (CIDR) of the proxies whose X-Forwarded-For names
	// the client, for per-IP limits and the access log. Empty (or "none"): none, the
	// client is the connection's peer.
	TrustedProxies []string
}

// WithDefaults returns c with its defaults filled in, or why it cannot serve.
func (c Config) WithDefaults() (Config, error) {
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.BaseURL == "" {
		return c, errors.New("base URL is required")
	}
	if c.Issuer == "" || c.ClientID == "" {
		return c, errors.New("OIDC issuer and client id are required")
	}
	if c.RedirectURL == "" {
		c.RedirectURL = c.BaseURL + paths.Callback()
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = 30 * time.Minute
	}
	if c.SessionLifetime <= 0 {
		c.SessionLifetime = 12 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.RateLimits = c.RateLimits.withDefaults()
	_, err := ipExtractor(c.TrustedProxies)
	return c, err
}

// Services are everything the pages drive, built by the composition root
// (cmd/gantry/assemble): web sees services and stores, never the database.
type Services struct {
	Sessions *session.Store
	// LoginKeys seal the sign-in in progress into the browser's cookie: the
	// key-encryption keys, which every replica shares.
	LoginKeys LoginSealer
	Orgs      *org.Service
	// GroupRules apply the organizations' group rules at every sign-in, and are managed
	// on the members page and in the API.
	GroupRules   *org.GroupRules
	Members      handlers.MemberAdmin
	Audit        *audit.Log
	Exports      *audit.Exports
	AuditKeys    *audit.Keys
	Governance   handlers.GovernanceReports
	Environments *environment.Service
	// Credentials manages environments' static cloud credentials.
	Credentials pages.EnvironmentCredentials
	Matrix      *risk.Store
	Policies    *policy.Store
	Workspaces  *workspace.Service
	Runs        *run.Runs
	Previews    *run.Previewer
	// Promotions promote workspaces to the next environment; Rollbacks roll them back
	// to an earlier state version.
	Promotions *promotion.Service
	Rollbacks  *rollback.Service
	// Archiver archives workspaces that hold nothing.
	Archiver *workspace.Archiver
	// Evidence builds runs' evidence reports.
	Evidence *evidence.Reports
	Catalog  *catalog.Catalog
	// Keys make every mutating request of a member take effect once (web/idempotency.go).
	Keys      IdempotencyKeys
	State     *state.Service
	Identity  *identity.Issuer
	Executors interface {
		handlers.ExecutorHealth
		pages.ExecutorWaits
	}
	ListenPool *pgxpool.Pool
	// Notifications sends notices and keeps webhooks and preferences; MailConfigured
	// says whether an SMTP server is set.
	Notifications  handlers.NotificationService
	MailConfigured bool
	// Breakglass is the manual change path (DESIGN §9).
	Breakglass *breakglass.Service
	// Tokens authenticate the JSON API's bearer tokens and manage them.
	Tokens *apitoken.Service
	// SCIM serves /scim/v2/ to organizations' directories (nil: not served).
	SCIM scimapi.Directory
	// SCIMTokens make owners' SCIM tokens on the directory sync page (nil: no page).
	SCIMTokens pages.SCIMTokens
	// Metrics receive each request's latency by route (nil: none).
	Metrics *telemetry.Metrics
	// Ready answers whether the database does (/readyz).
	Ready func(ctx context.Context) error
	// Limiter holds the rate limits' buckets, shared by every replica (ratelimit.go).
	Limiter RateLimiter
}

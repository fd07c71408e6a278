package identity

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"gorm.io/gorm"

	"gantry/models/keyring"
)

const (
	// MaxLifetime caps a token's life: a leaked token is worth at most this long.
	// Tokens are minted per phase after approval, so no token waits out an approval.
	MaxLifetime = 15 * time.Minute
	// DefaultAudience is the audience the sandbox cloud expects.
	DefaultAudience = "sandbox"
	// DefaultRotation is how long a signing key signs before a new one replaces it.
	DefaultRotation = 24 * time.Hour

	// verifyLeeway tolerates clock skew between Gantry replicas in Verify.
	verifyLeeway = time.Minute
)

// ErrInvalidToken means a token failed verification: malformed, unknown key, bad
// signature, wrong issuer or audience, expired or not yet valid.
var ErrInvalidToken = errors.New("invalid workload token")

// Options tune an Issuer; zero values take the defaults.
type Options struct {
	Lifetime time.Duration    // default and maximum MaxLifetime; more is an error at Mint
	Audience string           // default DefaultAudience
	Rotation time.Duration    // default DefaultRotation
	Now      func() time.Time // default time.Now; tests move it
	// Windows and Phases own what tokens are granted for (a break-glass window, a run's
	// phase): Introspect asks them, live, whether a token's grant still holds. Without
	// both the issuer answers no introspection and its discovery does not offer one.
	Windows WindowGrants
	Phases  PhaseGrants
}

// Issuer mints and verifies workload tokens. Replicas sharing a database share keys.
type Issuer struct {
	db        *gorm.DB
	keys      *keyring.Keyring
	issuer    string
	audience  string
	lifetime  time.Duration
	rotation  time.Duration
	now       func() time.Time
	discovery []byte
	configErr error // reported by Mint, since NewIssuer has no error to return
	windows   WindowGrants
	phases    PhaseGrants
}

// NewIssuer returns the issuer at issuerURL (e.g. https://gantry.example.com/workload,
// a trailing slash dropped): the discovery document must be served at
// issuerURL/.well-known/openid-configuration and the key set at issuerURL/jwks.
func NewIssuer(gdb *gorm.DB, keys *keyring.Keyring, issuerURL string, opts Options) *Issuer {
	i := &Issuer{db: gdb, keys: keys, issuer: strings.TrimSuffix(issuerURL, "/"),
		audience: opts.Audience, lifetime: opts.Lifetime, rotation: opts.Rotation, now: opts.Now,
		windows: opts.Windows, phases: opts.Phases}
	if i.windows == nil || i.phases == nil {
		i.windows, i.phases = nil, nil // both or neither: a half answer would be a wrong one
	}
	if i.audience == "" {
		i.audience = DefaultAudience
	}
	if i.lifetime == 0 {
		i.lifetime = MaxLifetime
	}
	if i.rotation <= 0 {
		i.rotation = DefaultRotation
	}
	if i.now == nil {
		i.now = time.Now
	}
	if i.lifetime < 0 || i.lifetime > MaxLifetime {
		i.configErr = fmt.Errorf("workload token lifetime %s is outside (0, %s]", i.lifetime, MaxLifetime)
	}
	// A verifier compares iss byte for byte with the URL it trusts and fetches
	// discovery from it, so it must be an absolute URL with nothing after the path.
	if u, err := url.Parse(i.issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") ||
		u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		i.configErr = errors.Join(i.configErr, fmt.Errorf("workload issuer %q is not an http(s) URL without query", i.issuer))
	}
	i.discovery = i.discoveryDoc()
	return i
}

// tokenClaims is a token's JSON payload.
type tokenClaims struct {
	jwt.Claims
	Organization string   `json:"gantry_org"`
	Environment  string   `json:"gantry_env"`
	Workspace    string   `json:"gantry_ws"`
	Run          string   `json:"gantry_run,omitempty"`
	Window       string   `json:"gantry_window,omitempty"`
	Phase        Phase    `json:"gantry_phase"`
	Scope        string   `json:"scope"`
	PlanDigest   string   `json:"gantry_plan,omitempty"`
	Lease        int64    `json:"gantry_lease,omitempty"`
	Approved     []string `json:"gantry_approved,omitempty"`
	// Tags are the token's claims again as AWS session tags, which an IAM role
	// policy tests as aws:PrincipalTag/<key> (docs/targets.md).
	Tags *sessionTags `json:"https://aws.amazon.com/tags,omitempty"`
}

// sessionTags is the claim AWS STS reads session tags from
// (AssumeRoleWithWebIdentity): every value a list of one string.
type sessionTags struct {
	PrincipalTags map[string][]string `json:"principal_tags"`
}

// TagDeletes and TagReplaces are the session tags that say whether the approval
// covered deletes and replaces ("true" or "false"); docs/targets.md's role policy
// denies destructive actions unless they are "true".
const (
	TagDeletes  = "gantry_deletes"
	TagReplaces = "gantry_replaces"
)

// tagsOf are the session tags of a token for c: where it acts, with which scope, and
// (always, "false" for a read token) whether deletes and replaces were approved.
func tagsOf(c Claims) *sessionTags {
	yes := func(b bool) []string { return []string{strconv.FormatBool(b)} }
	return &sessionTags{PrincipalTags: map[string][]string{
		"gantry_org":   {c.OrganizationID},
		"gantry_env":   {c.EnvironmentID},
		"gantry_ws":    {c.WorkspaceID},
		"gantry_phase": {string(c.Phase)},
		"gantry_scope": {c.Phase.Scope()},
		TagDeletes:     yes(c.Approves(ChangeDelete)),
		TagReplaces:    yes(c.Approves(ChangeReplace)),
	}}
}

// Mint signs a token for c with the current key, rotating it first when due. The token
// is a bearer credential: hand it to the job, never log or store it.
func (i *Issuer) Mint(ctx context.Context, c Claims) (token string, expires time.Time, err error) {
	return i.MintUntil(ctx, c, time.Time{})
}

// ErrTooLate means a token was asked for that would end before it begins: the window
// it was bound to has closed.
var ErrTooLate = errors.New("the token would already have expired")

// MintUntil is Mint for a token that must not outlive notAfter (a break-glass window's
// end; zero: no such bound): its lifetime is the issuer's, cut at notAfter.
func (i *Issuer) MintUntil(ctx context.Context, c Claims, notAfter time.Time) (token string, expires time.Time, err error) {
	if i.configErr != nil {
		return "", time.Time{}, i.configErr
	}
	if err := c.Validate(); err != nil {
		return "", time.Time{}, err
	}
	// JWT times are whole seconds; truncating keeps expires equal to the token's exp.
	now := i.now().Truncate(time.Second)
	expires = now.Add(i.lifetime)
	if !notAfter.IsZero() && notAfter.Before(expires) {
		expires = notAfter.Truncate(time.Second)
	}
	if !expires.After(now) {
		return "", time.Time{}, ErrTooLate
	}
	k, err := i.signingKey(ctx, now)
	if err != nil {
		return "", time.Time{}, err
	}
	priv, err := i.privateKey(k)
	if err != nil {
		return "", time.Time{}, err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: priv, KeyID: k.Kid, Algorithm: string(jose.ES256)}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("creating signer: %w", err)
	}
	token, err = jwt.Signed(signer).Claims(tokenClaims{
		Claims: jwt.Claims{
			Issuer:    i.issuer,
			Subject:   c.Subject(),
			Audience:  jwt.Audience{cmp.Or(c.Audience, i.audience)},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			Expiry:    jwt.NewNumericDate(expires),
			ID:        rand.Text(), // lets a verifier refuse replays and an audit name the token
		},
		Organization: c.OrganizationID,
		Environment:  c.EnvironmentID,
		Workspace:    c.WorkspaceID,
		Run:          c.RunID,
		Window:       c.WindowID,
		Phase:        c.Phase,
		Scope:        c.Phase.Scope(),
		PlanDigest:   c.PlanDigest,
		Lease:        c.Lease,
		Approved:     c.Approved,
		Tags:         tagsOf(c),
	}).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("signing workload token: %w", err)
	}
	return token, expires, nil
}

// JWKS is the published key set, {"keys":[...]}: public keys only, the active one and
// retired ones whose tokens may not all have expired yet.
func (i *Issuer) JWKS(ctx context.Context) ([]byte, error) {
	keys, err := i.publicKeys(ctx, i.now())
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		return nil, fmt.Errorf("encoding key set: %w", err)
	}
	return b, nil
}

// Discovery is the OpenID Provider metadata a cloud fetches to trust this issuer.
func (i *Issuer) Discovery() []byte { return i.discovery }

func (i *Issuer) discoveryDoc() []byte {
	doc := discovery{
		Issuer:        i.issuer,
		JWKSURI:       i.issuer + "/jwks",
		ResponseTypes: []string{"id_token"},
		SubjectTypes:  []string{"public"},
		SigningAlgs:   []string{string(jose.ES256)},
		ClaimsSupported: []string{"iss", "sub", "aud", "iat", "nbf", "exp", "jti",
			"gantry_org", "gantry_env", "gantry_ws", "gantry_run", "gantry_window", "gantry_phase", "scope",
			"gantry_plan", "gantry_lease", "gantry_approved", "https://aws.amazon.com/tags"},
	}
	if i.introspects() {
		// RFC 8414's names: the endpoint, and that a caller authenticates with nothing
		// but the token it asks about.
		doc.Introspection = i.issuer + IntrospectionPath
		doc.IntrospectionAuth = []string{"none"}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("encoding discovery document: %v", err)) // strings only: cannot fail
	}
	return b
}

// discovery is the issuer's OpenID Provider metadata.
type discovery struct {
	Issuer            string   `json:"issuer"`
	JWKSURI           string   `json:"jwks_uri"`
	ResponseTypes     []string `json:"response_types_supported"`
	SubjectTypes      []string `json:"subject_types_supported"`
	SigningAlgs       []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported   []string `json:"claims_supported"`
	Introspection     string   `json:"introspection_endpoint,omitempty"`
	IntrospectionAuth []string `json:"introspection_endpoint_auth_methods_supported,omitempty"`
}

// Verify checks token as a relying party would (signature by a published key, issuer,
// this issuer's audience, exp, nbf) and returns its claims. Database errors are
// returned as they are; everything wrong with the token wraps ErrInvalidToken.
func (i *Issuer) Verify(ctx context.Context, token string) (Claims, error) {
	c, _, err := i.verify(ctx, token, i.now())
	return c, err
}

// verify is Verify at now, also returning the token's registered claims (its exp and
// jti, which introspection reports).
func (i *Issuer) verify(ctx context.Context, token string, now time.Time) (Claims, jwt.Claims, error) {
	tc, err := i.verifiedClaims(ctx, token, now)
	if err != nil {
		return Claims{}, jwt.Claims{}, err
	}
	c := Claims{OrganizationID: tc.Organization, EnvironmentID: tc.Environment, WorkspaceID: tc.Workspace, RunID: tc.Run,
		WindowID: tc.Window, Phase: tc.Phase, PlanDigest: tc.PlanDigest, Lease: tc.Lease, Approved: tc.Approved}
	if err := c.Validate(); err != nil {
		return Claims{}, jwt.Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	// sub and scope are derived from the private claims; a token where they disagree was
	// not minted by Mint.
	if tc.Subject != c.Subject() || tc.Scope != c.Phase.Scope() {
		return Claims{}, jwt.Claims{}, fmt.Errorf("subject or scope disagrees with the gantry claims: %w", ErrInvalidToken)
	}
	return c, tc.Claims, nil
}

// verifiedClaims checks token's signature, issuer, audience and times at now and
// returns its payload.
func (i *Issuer) verifiedClaims(ctx context.Context, token string, now time.Time) (tokenClaims, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return tokenClaims{}, fmt.Errorf("parsing: %w: %w", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return tokenClaims{}, fmt.Errorf("token names no key: %w", ErrInvalidToken)
	}
	keys, err := i.publicKeys(ctx, now)
	if err != nil {
		return tokenClaims{}, err
	}
	kid := tok.Headers[0].KeyID
	var key *jose.JSONWebKey
	for n := range keys {
		if keys[n].KeyID == kid {
			key = &keys[n]
			break
		}
	}
	if key == nil {
		return tokenClaims{}, fmt.Errorf("key %q is not published: %w", kid, ErrInvalidToken)
	}
	var tc tokenClaims
	if err := tok.Claims(key.Key, &tc); err != nil {
		return tokenClaims{}, fmt.Errorf("checking signature: %w: %w", ErrInvalidToken, err)
	}
	// go-jose skips absent time claims; ours always carry them, so absence is forgery.
	if tc.Expiry == nil || tc.NotBefore == nil || tc.IssuedAt == nil {
		return tokenClaims{}, fmt.Errorf("token lacks exp, nbf or iat: %w", ErrInvalidToken)
	}
	if tc.Expiry.Time().Sub(tc.IssuedAt.Time()) > MaxLifetime {
		return tokenClaims{}, fmt.Errorf("token lifetime exceeds %s: %w", MaxLifetime, ErrInvalidToken)
	}
	if err := tc.ValidateWithLeeway(jwt.Expected{Issuer: i.issuer, AnyAudience: jwt.Audience{i.audience}, Time: now}, verifyLeeway); err != nil {
		return tokenClaims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	return tc, nil
}

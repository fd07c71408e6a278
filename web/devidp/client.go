package devidp

import (
	"net/url"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

var _ op.Client = (*client)(nil)

// client adapts a configured Client to op.Client.
type client struct {
	cfg      Client
	loginURL string // prefix; the auth request id is appended
	// onlyUserInfo: Config.ClaimsOnlyFromUserInfo.
	onlyUserInfo bool
}

func (c *client) GetID() string                    { return c.cfg.ID }
func (c *client) RedirectURIs() []string           { return c.cfg.RedirectURIs }
func (c *client) PostLogoutRedirectURIs() []string { return c.cfg.PostLogoutRedirectURIs }
func (c *client) LoginURL(id string) string        { return c.loginURL + url.QueryEscape(id) }

// ApplicationType: a web (confidential) client may use http redirect URIs
// for the code flow; a native (public) client may use loopback ones.
func (c *client) ApplicationType() op.ApplicationType {
	if c.cfg.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

// AuthMethod: basic also accepts client_secret_post, because the op only
// refuses post for clients registered as post when the provider lacks it.
func (c *client) AuthMethod() oidc.AuthMethod {
	if c.cfg.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType        { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return idTokenTTL }
func (c *client) DevMode() bool                       { return false }
func (c *client) IsScopeAllowed(string) bool          { return false }
func (c *client) ClockSkew() time.Duration            { return 0 }

// IDTokenUserinfoClaimsAssertion puts email and name into the ID token even
// though an access token is issued too, unless Config.ClaimsOnlyFromUserInfo.
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return !c.onlyUserInfo }

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string     { return keepScopes }
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string { return keepScopes }

func keepScopes(s []string) []string { return s }

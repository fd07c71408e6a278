package identity

import (
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// MintedExpiry reports when token expires if it is a workload token of this issuer (a JWT
// naming it as iss, with an exp), and ok false for anything else, such as an
// environment's static cloud key. It is for a token Gantry itself holds (a job's, just
// minted), to know whether and when to mint the next one: the signature is NOT checked,
// so never use it to believe a token someone presents (Verify does that).
func (i *Issuer) MintedExpiry(token string) (expires time.Time, ok bool) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return time.Time{}, false
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil || c.Issuer != i.issuer || c.Expiry == nil {
		return time.Time{}, false
	}
	return c.Expiry.Time(), true
}

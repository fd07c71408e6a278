package devidp

import (
	"crypto/rsa"

	"github.com/go-jose/go-jose/v4"
)

// signingKey is the provider's RSA key; it serves as op.SigningKey, and its
// public half as op.Key on the JWKS endpoint.
type signingKey struct {
	id  string
	alg jose.SignatureAlgorithm
	key *rsa.PrivateKey
}

func (k signingKey) ID() string                                  { return k.id }
func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k signingKey) Key() any                                    { return k.key }

type publicKey struct{ k signingKey }

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return &p.k.key.PublicKey }

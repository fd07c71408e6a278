package identity_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func newKeyring(t *testing.T) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(keyring.NewKeySpec("kek1"))
	require.NoError(t, err)
	return k
}

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// serve publishes the issuer newIssuer builds on an HTTP server whose URL is that
// issuer's URL, the way the portal will: the listener comes first, so the URL is
// known before the issuer exists.
func serve(t *testing.T, newIssuer func(issuerURL string) *identity.Issuer) (*identity.Issuer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	issuerURL := "http://" + ln.Addr().String() + "/workload"
	iss := newIssuer(issuerURL)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /workload/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(iss.Discovery())
	})
	mux.HandleFunc("GET /workload/jwks", func(w http.ResponseWriter, r *http.Request) {
		b, err := iss.JWKS(r.Context())
		if err != nil {
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return iss, issuerURL
}

// verifier is an external relying party (the sandbox cloud) trusting issuerURL.
func verifier(t *testing.T, issuerURL string, now func() time.Time) *oidc.IDTokenVerifier {
	t.Helper()
	provider, err := oidc.NewProvider(t.Context(), issuerURL)
	require.NoError(t, err)
	return provider.Verifier(&oidc.Config{ClientID: "sandbox", Now: now})
}

// testPlanDigest is the plan an apply token of claimsFor applies.
var testPlanDigest = "sha256:" + strings.Repeat("5e", 32)

func claimsFor(phase identity.Phase) identity.Claims {
	c := identity.Claims{OrganizationID: "org-a", EnvironmentID: "env-b", WorkspaceID: "ws-c", RunID: "run-d", Phase: phase}
	if phase == identity.PhaseApply {
		c.PlanDigest, c.Lease = testPlanDigest, 42
	}
	return c
}

func kidOf(t *testing.T, token string) string {
	t.Helper()
	header, _, ok := strings.Cut(token, ".")
	require.True(t, ok)
	raw, err := base64.RawURLEncoding.DecodeString(header)
	require.NoError(t, err)
	var h struct{ Kid, Alg, Typ string }
	require.NoError(t, json.Unmarshal(raw, &h))
	require.Equal(t, "ES256", h.Alg)
	require.Equal(t, "JWT", h.Typ)
	return h.Kid
}

func jwksKids(t *testing.T, iss *identity.Issuer) []string {
	t.Helper()
	b, err := iss.JWKS(t.Context())
	require.NoError(t, err)
	var set jose.JSONWebKeySet
	require.NoError(t, json.Unmarshal(b, &set))
	kids := []string{}
	for _, k := range set.Keys {
		require.True(t, k.IsPublic())
		kids = append(kids, k.KeyID)
	}
	return kids
}

func TestMintVerifiedByOIDCRelyingParty(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	keys := newKeyring(t)
	iss, issuerURL := serve(t, func(u string) *identity.Issuer {
		return identity.NewIssuer(gdb, keys, u+"/", identity.Options{}) // trailing slash dropped
	})

	var doc map[string]any
	require.NoError(t, json.Unmarshal(iss.Discovery(), &doc))
	require.Equal(t, issuerURL, doc["issuer"])
	require.Equal(t, issuerURL+"/jwks", doc["jwks_uri"])
	require.Equal(t, []any{"ES256"}, doc["id_token_signing_alg_values_supported"])
	require.Equal(t, []any{"id_token"}, doc["response_types_supported"])

	v := verifier(t, issuerURL, nil)
	for phase, scope := range map[identity.Phase]string{identity.PhasePlan: "read", identity.PhaseApply: "write", identity.PhaseVerify: "read"} {
		c := claimsFor(phase)
		before := time.Now().Truncate(time.Second)
		token, expires, err := iss.Mint(t.Context(), c)
		require.NoError(t, err)
		require.WithinRange(t, expires, before.Add(identity.MaxLifetime), time.Now().Add(identity.MaxLifetime))

		idt, err := v.Verify(t.Context(), token)
		require.NoError(t, err, "phase %s", phase)
		require.Equal(t, issuerURL, idt.Issuer)
		require.Equal(t, []string{"sandbox"}, idt.Audience)
		require.Equal(t, "org:org-a:env:env-b:ws:ws-c:run:run-d:phase:"+string(phase), idt.Subject)
		require.True(t, idt.Expiry.Equal(expires))
		var got struct {
			Org   string `json:"gantry_org"`
			Env   string `json:"gantry_env"`
			WS    string `json:"gantry_ws"`
			Run   string `json:"gantry_run"`
			Phase string `json:"gantry_phase"`
			Scope string `json:"scope"`
			Plan  string `json:"gantry_plan"`
			Lease int64  `json:"gantry_lease"`
			JTI   string `json:"jti"`
			NBF   int64  `json:"nbf"`
			IAT   int64  `json:"iat"`
			EXP   int64  `json:"exp"`
		}
		require.NoError(t, idt.Claims(&got))
		require.Equal(t, "org-a", got.Org)
		require.Equal(t, "env-b", got.Env)
		require.Equal(t, "ws-c", got.WS)
		require.Equal(t, "run-d", got.Run)
		require.Equal(t, string(phase), got.Phase)
		require.Equal(t, scope, got.Scope)
		if phase == identity.PhaseApply {
			// An apply token names the plan it applies and its attempt at it.
			require.Equal(t, testPlanDigest, got.Plan)
			require.Equal(t, int64(42), got.Lease)
		} else {
			require.Empty(t, got.Plan)
			require.Zero(t, got.Lease)
		}
		require.NotEmpty(t, got.JTI)
		require.Equal(t, got.IAT, got.NBF)
		require.Equal(t, int64(identity.MaxLifetime/time.Second), got.EXP-got.IAT)

		back, err := iss.Verify(t.Context(), token)
		require.NoError(t, err)
		require.Equal(t, c, back)
		require.Equal(t, jwksKids(t, iss), []string{kidOf(t, token)})
	}

	// A shorter lifetime is honoured.
	short := identity.NewIssuer(gdb, keys, issuerURL, identity.Options{Lifetime: 5 * time.Minute})
	_, expires, err := short.Mint(t.Context(), claimsFor(identity.PhasePlan))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), expires, 2*time.Second)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	keys := newKeyring(t)
	iss, issuerURL := serve(t, func(u string) *identity.Issuer { return identity.NewIssuer(gdb, keys, u, identity.Options{}) })
	v := verifier(t, issuerURL, nil)
	ctx := t.Context()

	t.Run("expired", func(t *testing.T) {
		past := identity.NewIssuer(gdb, keys, issuerURL, identity.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		token, _, err := past.Mint(ctx, claimsFor(identity.PhaseApply))
		require.NoError(t, err)
		_, err = v.Verify(ctx, token)
		require.ErrorContains(t, err, "expired")
		_, err = iss.Verify(ctx, token)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
		_, err = past.Verify(ctx, token) // valid in its own past
		require.NoError(t, err)
	})

	t.Run("wrong audience", func(t *testing.T) {
		other := identity.NewIssuer(gdb, keys, issuerURL, identity.Options{Audience: "elsewhere"})
		token, _, err := other.Mint(ctx, claimsFor(identity.PhaseApply))
		require.NoError(t, err)
		_, err = v.Verify(ctx, token)
		require.ErrorContains(t, err, "audience")
		_, err = iss.Verify(ctx, token)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})

	t.Run("tampered payload", func(t *testing.T) {
		token, _, err := iss.Mint(ctx, claimsFor(identity.PhasePlan))
		require.NoError(t, err)
		parts := strings.Split(token, ".")
		require.Len(t, parts, 3)
		raw, err := base64.RawURLEncoding.DecodeString(parts[1])
		require.NoError(t, err)
		var payload map[string]any
		require.NoError(t, json.Unmarshal(raw, &payload))
		payload["gantry_phase"], payload["scope"] = "apply", "write" // escalate plan to apply
		payload["sub"] = strings.Replace(payload["sub"].(string), "phase:plan", "phase:apply", 1)
		raw, err = json.Marshal(payload)
		require.NoError(t, err)
		forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw) + "." + parts[2]
		_, err = v.Verify(ctx, forged)
		require.ErrorContains(t, err, "signature")
		_, err = iss.Verify(ctx, forged)
		require.ErrorIs(t, err, identity.ErrInvalidToken)
		_, err = iss.Verify(ctx, "not.a.token")
		require.ErrorIs(t, err, identity.ErrInvalidToken)
	})

	t.Run("lifetime over 15m", func(t *testing.T) {
		long := identity.NewIssuer(gdb, keys, issuerURL, identity.Options{Lifetime: identity.MaxLifetime + time.Second})
		_, _, err := long.Mint(ctx, claimsFor(identity.PhasePlan))
		require.ErrorContains(t, err, "lifetime")
	})

	t.Run("bad claims", func(t *testing.T) {
		for name, mutate := range map[string]func(*identity.Claims){
			"empty org":                  func(c *identity.Claims) { c.OrganizationID = "" },
			"empty env":                  func(c *identity.Claims) { c.EnvironmentID = "" },
			"colon in ws":                func(c *identity.Claims) { c.WorkspaceID = "ws-c:run:x" },
			"colon in run":               func(c *identity.Claims) { c.RunID = "run:d" },
			"unknown phase":              func(c *identity.Claims) { c.Phase = "destroy" },
			"no phase":                   func(c *identity.Claims) { c.Phase = "" },
			"run names a window":         func(c *identity.Claims) { c.WindowID = "bgw-1" },
			"break-glass names a run":    func(c *identity.Claims) { c.Phase = identity.PhaseBreakglass; c.WindowID = "bgw-1" },
			"break-glass without window": func(c *identity.Claims) { c.Phase = identity.PhaseBreakglass; c.RunID = "" },
			"apply without plan digest":  func(c *identity.Claims) { c.PlanDigest = "" },
			"apply with a bad digest":    func(c *identity.Claims) { c.PlanDigest = "sha256:XYZ" },
			"apply without lease":        func(c *identity.Claims) { c.Lease = 0 },
			"plan names a plan digest":   func(c *identity.Claims) { c.Phase = identity.PhasePlan },
			"break-glass names a digest": func(c *identity.Claims) { c.Phase, c.RunID, c.WindowID = identity.PhaseBreakglass, "", "bgw-1" },
		} {
			c := claimsFor(identity.PhaseApply)
			mutate(&c)
			_, _, err := iss.Mint(ctx, c)
			require.ErrorIs(t, err, identity.ErrInvalidClaims, name)
		}
	})
}

func TestRotationKeepsOldTokensVerifiable(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	clk := &clock{t: time.Now()}
	iss, issuerURL := serve(t, func(u string) *identity.Issuer {
		return identity.NewIssuer(gdb, newKeyring(t), u, identity.Options{Rotation: 24 * time.Hour, Now: clk.Now})
	})
	v := verifier(t, issuerURL, clk.Now)
	ctx := t.Context()

	first, _, err := iss.Mint(ctx, claimsFor(identity.PhasePlan))
	require.NoError(t, err)
	oldKid := kidOf(t, first)

	// Just before the rotation period ends, the same key still signs.
	clk.Advance(24*time.Hour - time.Minute)
	old, _, err := iss.Mint(ctx, claimsFor(identity.PhaseApply))
	require.NoError(t, err)
	require.Equal(t, oldKid, kidOf(t, old))

	// Past it, a new key signs; the old key stays published, so the token it signed a
	// minute ago still verifies, for Gantry and for the relying party.
	clk.Advance(2 * time.Minute)
	fresh, _, err := iss.Mint(ctx, claimsFor(identity.PhaseApply))
	require.NoError(t, err)
	newKid := kidOf(t, fresh)
	require.NotEqual(t, oldKid, newKid)
	require.Equal(t, []string{newKid, oldKid}, jwksKids(t, iss))
	for _, token := range []string{old, fresh} {
		_, err := iss.Verify(ctx, token)
		require.NoError(t, err)
		_, err = v.Verify(ctx, token)
		require.NoError(t, err)
	}

	// Once every token the old key signed has expired, it leaves the key set.
	var retireAfter time.Time
	require.NoError(t, gdb.Raw("SELECT retire_after FROM workload_keys WHERE kid = ?", oldKid).Scan(&retireAfter).Error)
	require.False(t, retireAfter.Before(clk.Now().Add(identity.MaxLifetime)), "retired key must outlive its tokens")
	clk.Advance(retireAfter.Sub(clk.Now()) + time.Second)
	require.Equal(t, []string{newKid}, jwksKids(t, iss))
	_, err = iss.Verify(ctx, old)
	require.ErrorIs(t, err, identity.ErrInvalidToken)

	// The next rotation deletes it, private half included.
	clk.Advance(24 * time.Hour)
	_, _, err = iss.Mint(ctx, claimsFor(identity.PhasePlan))
	require.NoError(t, err)
	var n int64
	require.NoError(t, gdb.Raw("SELECT count(*) FROM workload_keys WHERE kid = ?", oldKid).Scan(&n).Error)
	require.Zero(t, n)
}

func TestReplicasShareKeys(t *testing.T) {
	t.Parallel()
	dsn := dbtest.NewURL(t)
	keys := newKeyring(t) // replicas are configured with the same keyring
	open := func() *gorm.DB {
		gdb, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
		require.NoError(t, err)
		sqlDB, err := gdb.DB()
		require.NoError(t, err)
		t.Cleanup(func() { sqlDB.Close() })
		return gdb
	}
	const issuerURL = "https://gantry.example.com/workload"
	a := identity.NewIssuer(open(), keys, issuerURL, identity.Options{})
	b := identity.NewIssuer(open(), keys, issuerURL, identity.Options{})

	// Both replicas mint at once on an empty table: exactly one key gets created. Each
	// goroutine keeps its token and error in its own slot; the test's goroutine checks them
	// (require may only stop the test from there).
	var wg sync.WaitGroup
	tokens := make([]string, 16)
	errs := make([]error, len(tokens))
	for n := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			iss := a
			if n%2 == 1 {
				iss = b
			}
			tokens[n], _, errs[n] = iss.Mint(t.Context(), claimsFor(identity.PhaseApply))
		}()
	}
	wg.Wait()
	for n, err := range errs {
		require.NoError(t, err, "mint %d", n)
	}

	ja, err := a.JWKS(t.Context())
	require.NoError(t, err)
	jb, err := b.JWKS(t.Context())
	require.NoError(t, err)
	require.JSONEq(t, string(ja), string(jb))
	kids := jwksKids(t, a)
	require.Len(t, kids, 1)
	for _, token := range tokens {
		require.Equal(t, kids[0], kidOf(t, token))
		for _, iss := range []*identity.Issuer{a, b} {
			c, err := iss.Verify(t.Context(), token)
			require.NoError(t, err)
			require.Equal(t, claimsFor(identity.PhaseApply), c)
		}
	}
}

func TestPrivateKeyNotInClear(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	keys := newKeyring(t)
	iss := identity.NewIssuer(gdb, keys, "https://gantry.example.com/workload", identity.Options{})
	_, _, err := iss.Mint(t.Context(), claimsFor(identity.PhasePlan))
	require.NoError(t, err)

	var row struct {
		Kid        string
		PublicJWK  string
		KeyID      string
		WrappedKey []byte
		Nonce      []byte
		Ciphertext []byte
		AsJSON     string
	}
	require.NoError(t, gdb.Raw(`SELECT kid, public_jwk::text AS public_jwk, key_id, wrapped_key, nonce, ciphertext,
		row_to_json(w)::text AS as_json FROM workload_keys w`).Scan(&row).Error)
	require.Equal(t, "kek1", row.KeyID)

	// The sealed blob is the signing key: it opens (with the keyring only) to the private
	// half of the published public key.
	der, err := keys.Open(keyring.Sealed{KeyID: row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext},
		[]byte("workload_key:"+row.Kid))
	require.NoError(t, err)
	parsed, err := x509.ParsePKCS8PrivateKey(der)
	require.NoError(t, err)
	priv := parsed.(*ecdsa.PrivateKey)
	var pub jose.JSONWebKey
	require.NoError(t, pub.UnmarshalJSON([]byte(row.PublicJWK)))
	require.True(t, priv.PublicKey.Equal(pub.Key))

	d, err := priv.Bytes()
	require.NoError(t, err)
	for _, col := range [][]byte{row.WrappedKey, row.Nonce, row.Ciphertext, []byte(row.PublicJWK)} {
		require.False(t, bytes.Contains(col, d), "private scalar in clear")
		require.False(t, bytes.Contains(col, der), "PKCS#8 key in clear")
	}
	for _, enc := range []string{hex.EncodeToString(d), base64.RawURLEncoding.EncodeToString(d), base64.StdEncoding.EncodeToString(d),
		"PRIVATE KEY", `"d"`} {
		require.NotContains(t, row.AsJSON, enc)
	}
	b, err := iss.JWKS(t.Context())
	require.NoError(t, err)
	require.NotContains(t, string(b), `"d"`)
	require.NotContains(t, string(b), base64.RawURLEncoding.EncodeToString(d))
}

// TestBreakglassTokens: a break-glass window's token is write-scoped, names the window
// (not a run) in its subject and claims, and never outlives the window.
func TestBreakglassTokens(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	keys := newKeyring(t)
	iss, issuerURL := serve(t, func(u string) *identity.Issuer { return identity.NewIssuer(gdb, keys, u, identity.Options{}) })
	v := verifier(t, issuerURL, nil)
	c := identity.Claims{OrganizationID: "org-a", EnvironmentID: "env-b", WorkspaceID: "ws-c", WindowID: "bgw-d", Phase: identity.PhaseBreakglass}

	// A window ending in 5 minutes cuts the token's 15 minutes to 5.
	end := time.Now().Add(5 * time.Minute)
	token, expires, err := iss.MintUntil(t.Context(), c, end)
	require.NoError(t, err)
	require.False(t, expires.After(end))
	require.WithinDuration(t, end, expires, 2*time.Second)
	idt, err := v.Verify(t.Context(), token)
	require.NoError(t, err)
	require.Equal(t, "org:org-a:env:env-b:ws:ws-c:window:bgw-d:phase:breakglass", idt.Subject)
	var got map[string]any
	require.NoError(t, idt.Claims(&got))
	require.Equal(t, "bgw-d", got["gantry_window"])
	require.Equal(t, "write", got["scope"])
	require.NotContains(t, got, "gantry_run")
	back, err := iss.Verify(t.Context(), token)
	require.NoError(t, err)
	require.Equal(t, c, back)

	// A window ending in an hour still gets at most MaxLifetime.
	_, expires, err = iss.MintUntil(t.Context(), c, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(identity.MaxLifetime), expires, 2*time.Second)

	// A window that has ended gets nothing.
	_, _, err = iss.MintUntil(t.Context(), c, time.Now().Add(-time.Second))
	require.ErrorIs(t, err, identity.ErrTooLate)
}

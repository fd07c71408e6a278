package web

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/models/keyring"
	"gantry/views/paths"
)

// A sign-in in progress lives in the browser, not in the database: starting one writes
// nothing, so starts need no limit, and an office behind one NAT signs in at any pace.
// What the callback must find again (state, nonce, PKCE verifier, where to go back) is
// sealed with the key-encryption keys (AES-GCM: neither readable nor changeable by anyone
// without them, and every replica opens what another sealed) into a cookie that lives as
// long as a sign-in may take, is sent to the callback only (Path), and is cleared by it.
// The cookie is bound to the browser as the session row was (SameSite=Lax, HttpOnly,
// __Host- over https), so a callback carried to another browser finds nothing to match.
// A replayed callback finds no cookie in the browser that made it, and anywhere else the
// provider refuses its code a second time: both count as failed sign-ins (failures.go).

// LoginSealer seals the sign-in cookie: the key-encryption keys (*keyring.Keyring).
type LoginSealer interface {
	Seal(plaintext, aad []byte) (keyring.Sealed, error)
	Open(s keyring.Sealed, aad []byte) ([]byte, error)
}

// loginFlow is what the callback must find again: the values sent to the provider and
// checked in its answer.
type loginFlow struct {
	State     string    `json:"state"`
	Nonce     string    `json:"nonce"`
	Verifier  string    `json:"verifier"` // PKCE code verifier
	ReturnTo  string    `json:"return_to"`
	StartedAt time.Time `json:"started_at"`
	// Reauth asked the provider to authenticate the person again (prompt=login,
	// max_age=0), for an elevated decision.
	Reauth bool `json:"reauth,omitempty"`
}

// loginFlowAAD binds a sealed flow to this use: nothing else sealed with the same keys
// opens as one.
var loginFlowAAD = []byte("gantry sign-in flow cookie v1")

// gcmNonceSize is the nonce length of the keyring's AES-GCM.
const gcmNonceSize = 12

// maxLoginCookie bounds what is decoded: a sealed flow is about 500 characters.
const maxLoginCookie = 2048

func (s *Server) loginCookieName() string {
	if s.secureCookies() {
		return "__Host-gantry_login"
	}
	return "gantry_login"
}

// loginCookie is the sign-in cookie with value; an empty value clears it. Over https it
// is __Host- (Path=/, no Domain: a subdomain cannot plant one); otherwise it goes to the
// callback only.
func (s *Server) loginCookie(value string) *http.Cookie {
	ck := &http.Cookie{Name: s.loginCookieName(), Value: value, Path: paths.Callback(), HttpOnly: true,
		Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode, MaxAge: int(loginFlowLifetime.Seconds())}
	if ck.Secure {
		ck.Path = "/"
	}
	if value == "" {
		ck.MaxAge = -1
	}
	return ck
}

// putLoginFlow seals flow into the browser's sign-in cookie.
func (s *Server) putLoginFlow(c echo.Context, flow loginFlow) error {
	value, err := sealLoginFlow(s.loginKeys, flow)
	if err != nil {
		return err
	}
	c.SetCookie(s.loginCookie(value))
	return nil
}

// takeLoginFlow reads the browser's sign-in in progress and clears its cookie: a
// callback can be tried once from a browser. ok is false when there is none, or none
// that these keys sealed.
func (s *Server) takeLoginFlow(c echo.Context) (flow loginFlow, ok bool) {
	ck, err := c.Cookie(s.loginCookieName())
	if err != nil {
		return loginFlow{}, false
	}
	c.SetCookie(s.loginCookie(""))
	return openLoginFlow(s.loginKeys, ck.Value)
}

// sealLoginFlow is flow sealed with keys, as the cookie holds it.
func sealLoginFlow(keys LoginSealer, flow loginFlow) (string, error) {
	plain, err := json.Marshal(flow)
	if err != nil {
		return "", err
	}
	sealed, err := keys.Seal(plain, loginFlowAAD)
	if err != nil {
		return "", err
	}
	return encodeSealed(sealed), nil
}

// openLoginFlow is the flow a cookie's value holds, if keys sealed it.
func openLoginFlow(keys LoginSealer, value string) (flow loginFlow, ok bool) {
	sealed, ok := decodeSealed(value)
	if !ok {
		return loginFlow{}, false
	}
	plain, err := keys.Open(sealed, loginFlowAAD)
	if err != nil || json.Unmarshal(plain, &flow) != nil {
		return loginFlow{}, false
	}
	return flow, true
}

// encodeSealed writes s as four base64url parts joined by dots (a key id may hold dots).
func encodeSealed(s keyring.Sealed) string {
	enc := base64.RawURLEncoding.EncodeToString
	return strings.Join([]string{enc([]byte(s.KeyID)), enc(s.WrappedKey), enc(s.Nonce), enc(s.Ciphertext)}, ".")
}

func decodeSealed(v string) (keyring.Sealed, bool) {
	if len(v) > maxLoginCookie {
		return keyring.Sealed{}, false
	}
	parts := strings.Split(v, ".")
	if len(parts) != 4 {
		return keyring.Sealed{}, false
	}
	var raw [4][]byte
	for i, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return keyring.Sealed{}, false
		}
		raw[i] = b
	}
	// AES-GCM's nonce: a cipher handed another length panics rather than refusing.
	if len(raw[2]) != gcmNonceSize {
		return keyring.Sealed{}, false
	}
	return keyring.Sealed{KeyID: string(raw[0]), WrappedKey: raw[1], Nonce: raw[2], Ciphertext: raw[3]}, true
}

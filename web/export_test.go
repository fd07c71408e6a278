package web

import "net/http"

// SafeReturn exposes safeReturn to the external tests.
var SafeReturn = safeReturn

// MultiLineFields exposes the fields that keep tab, CR and LF.
var MultiLineFields = multiLineFields

// IPExtractor and ClientAddress expose how rate limits tell clients apart.
var (
	IPExtractor   = ipExtractor
	ClientAddress = clientAddress
)

// LoginFlow is a sign-in in progress as its cookie holds it; SealLoginFlow and
// OpenLoginFlow make and read the cookie's value with the keys (app.Keys).
type LoginFlow = loginFlow

var (
	SealLoginFlow = sealLoginFlow
	OpenLoginFlow = openLoginFlow
)

// LoginCookie is the sign-in cookie a Server at baseURL sets with value ("": clears it).
func LoginCookie(baseURL, value string) *http.Cookie {
	return (&Server{cfg: Config{BaseURL: baseURL}}).loginCookie(value)
}

// ReadOnlyPosts are the POST routes that change nothing and take no Idempotency-Key.
var ReadOnlyPosts = readOnlyPosts

package web

// SafeReturn exposes safeReturn to the external tests.
var SafeReturn = safeReturn

// MultiLineFields exposes the fields that keep tab, CR and LF.
var MultiLineFields = multiLineFields

// IPExtractor and ClientAddress expose how rate limits tell clients apart.
var (
	IPExtractor   = ipExtractor
	ClientAddress = clientAddress
)

package web

// SafeReturn exposes safeReturn to the external tests.
var SafeReturn = safeReturn

// MultiLineFields exposes the fields that keep tab, CR and LF.
var MultiLineFields = multiLineFields

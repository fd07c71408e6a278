package web

// SafeReturn exposes safeReturn to the external tests.
var SafeReturn = safeReturn

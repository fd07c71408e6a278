package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"gantry/models/errs"
	"gantry/views/paths"
)

// maxBodyBytes bounds every request body but the state backend's (which caps its own):
// BodyLimit in New and the edge's own reads of forms and JSON use it. 2,000,000 bytes
// ("2M" in echo's decimal units).
const maxBodyBytes int64 = 2_000_000

// maxIntrospectionBytes bounds a workload token introspection: a form with one token
// (about a kilobyte). A cloud asks at every call its workloads make, so a body that
// could only be abuse is refused before it is read.
const maxIntrospectionBytes int64 = 16 << 10

// bodyLimit is the most request r's form or JSON body may hold.
func bodyLimit(r *http.Request) int64 {
	if r.URL.Path == paths.WorkloadIntrospection() {
		return maxIntrospectionBytes
	}
	return maxBodyBytes
}

// multiLineFields are the form fields people type several lines into: the Rego source
// and tests of a policy upload (the textareas of views/policies.templ), the reason of a
// run decision (approve, reject, override, cancel, recover), which is stored and shown
// as written, an environment's owner groups (one per line; the service then refuses
// control characters inside a group name) and its Kubernetes target's CA certificate
// (PEM lines, environment.TargetCAField). Tab, CR and LF stay allowed in them; every
// other field refuses all control characters, so none reach the database or a page.
var multiLineFields = map[string]bool{"rego": true, "tests": true, "reason": true, "owner_groups": true, "target_kubernetes_ca": true}

// What each part of a request may carry besides printable text. NUL and bytes that are
// not UTF-8 are refused everywhere.
const (
	allowNone      = ""
	allowHeader    = "\t"     // HTTP allows tab inside header values
	allowMultiLine = "\t\r\n" // multiLineFields
)

// refuseBadInput is the edge: it refuses with 400, before any handler, session lookup
// or query runs, a request whose path, query, header values, Basic-auth credentials or
// form fields hold NUL, bytes that are not UTF-8 or control characters (DEL included),
// and a form or JSON body that cannot be read. Such bytes otherwise reach PostgreSQL,
// which refuses them with an error that was a 500, or are stored and shown to others.
func refuseBadInput(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := checkRequest(c); err != nil {
			return err
		}
		return next(c)
	}
}

func checkRequest(c echo.Context) error {
	r := c.Request()
	// The decoded path is what routes and handlers see; the escaped one is what was sent.
	if !cleanText(r.URL.Path, allowNone) || !cleanText(r.URL.EscapedPath(), allowNone) {
		return badInput("The address contains characters Gantry does not accept (control characters or bytes that are not UTF-8). Check the link and try again.")
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badInput("The address's query could not be read (a broken %-escape). Check the link and try again.")
	}
	if _, ok := cleanValues(query, func(string) string { return allowNone }); !ok {
		return badInput("The address's query contains characters Gantry does not accept (control characters or bytes that are not UTF-8). Check the link and try again.")
	}
	// Go's server has already refused control characters other than tab in header values;
	// bytes that are not UTF-8 it lets by.
	for _, values := range r.Header {
		for _, v := range values {
			if !cleanText(v, allowHeader) {
				return badInput("A request header contains characters Gantry does not accept (control characters or bytes that are not UTF-8).")
			}
		}
	}
	if user, pass, ok := r.BasicAuth(); ok && (!cleanText(user, allowNone) || !cleanText(pass, allowNone)) {
		return badInput("The credentials contain characters Gantry does not accept (control characters or bytes that are not UTF-8).")
	}
	// The state backend's bodies are tofu's JSON state, read and capped by its handler.
	// SCIM's bodies are read by its library, which answers RFC 7644 §3.12 error documents.
	if strings.HasPrefix(r.URL.Path, "/state/") || strings.HasPrefix(r.URL.Path, "/scim/") {
		return nil
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return nil
	}
	contentType := r.Header.Get(echo.HeaderContentType)
	mediaType, _, err := mime.ParseMediaType(contentType)
	if contentType != "" && err != nil {
		// Request.ParseForm would fail on it too, in whichever handler reads the form.
		return errs.Explain(fmt.Errorf("content type %q: %w: %w", contentType, err, errs.ErrBadRequest),
			"The request's Content-Type could not be read.")
	}
	switch {
	case mediaType == echo.MIMEApplicationForm || mediaType == echo.MIMEMultipartForm:
		return checkForm(c, mediaType)
	case mediaType == echo.MIMEApplicationJSON || strings.HasSuffix(mediaType, "+json"):
		return checkJSON(c)
	}
	return nil
}

// checkForm parses a form body (within its bodyLimit) so that a broken one is a 400, and
// checks every field. Handlers then read the parsed form, never the body again.
func checkForm(c echo.Context, mediaType string) error {
	r := c.Request()
	limit := bodyLimit(r)
	if r.ContentLength > limit {
		return echo.ErrStatusRequestEntityTooLarge
	}
	r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, limit)
	var err error
	if mediaType == echo.MIMEMultipartForm {
		// Within the limit of memory every part stays in memory: no temporary files.
		err = r.ParseMultipartForm(limit)
	} else {
		err = r.ParseForm()
	}
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		return echo.ErrStatusRequestEntityTooLarge
	}
	if err != nil {
		return errs.Explain(fmt.Errorf("parsing form: %w: %w", err, errs.ErrBadRequest),
			"The form could not be read (its encoding is broken). Go back, reload the page and send it again.")
	}
	allow := func(name string) string {
		if multiLineFields[name] {
			return allowMultiLine
		}
		return allowNone
	}
	if field, ok := cleanValues(r.PostForm, allow); !ok {
		what := "A form field"
		if field != "" {
			what = fmt.Sprintf("The field %q", field)
		}
		return badInput(what + " contains characters Gantry does not accept (control characters, line breaks in a one-line field, or bytes that are not UTF-8). Check what you entered and send it again.")
	}
	if r.MultipartForm != nil {
		// r.PostForm already holds the text parts. Uploaded files are checked by name only:
		// no handler reads a file part (a Rego upload arrives as the textareas' text).
		for name, files := range r.MultipartForm.File {
			if !cleanText(name, allowNone) {
				return badInput("A form field's name contains characters Gantry does not accept.")
			}
			for _, f := range files {
				if !cleanText(f.Filename, allowNone) {
					return badInput("An uploaded file's name contains characters Gantry does not accept (control characters or bytes that are not UTF-8). Rename the file and send it again.")
				}
			}
		}
	}
	return nil
}

// checkJSON reads a JSON body (within its bodyLimit) and refuses it when it is not UTF-8
// or carries NUL or another control character other than tab, CR or LF, escaped or
// not: encoding/json would quietly turn bad bytes and lone surrogates into U+FFFD. The
// body is put back for the handler to bind.
func checkJSON(c echo.Context) error {
	r := c.Request()
	limit := bodyLimit(r)
	if r.ContentLength > limit {
		return echo.ErrStatusRequestEntityTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return errs.Explain(fmt.Errorf("reading JSON body: %w: %w", err, errs.ErrBadRequest), "The request body could not be read.")
	}
	if int64(len(body)) > limit {
		return echo.ErrStatusRequestEntityTooLarge
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !utf8.Valid(body) || bytes.IndexByte(body, 0) >= 0 || !cleanJSONStrings(body) {
		return badInput("The JSON body contains characters Gantry does not accept (NUL or other control characters, or bytes that are not UTF-8).")
	}
	return nil
}

// cleanJSONStrings reports whether body's strings hold only acceptable characters,
// escaped or not: no \u0000 or other control character but \t, \r and \n (JSON does
// not say which field is multi-line), and no lone surrogate.
func cleanJSONStrings(body []byte) bool {
	inString := false
	for i := 0; i < len(body); i++ {
		switch b := body[i]; {
		case b == '"':
			inString = !inString
		case b < 0x20 || b == 0x7f:
			if inString {
				return false
			}
		case b == '\\' && inString:
			i++
			if i >= len(body) {
				return true // not JSON: the binder says so
			}
			switch body[i] {
			case 'b', 'f': // backspace, form feed: control characters
				return false
			case 'u':
			default: // \" \\ \/ \n \r \t
				continue
			}
			r, ok := hex4(body, i+1)
			if !ok {
				return true // not JSON: the binder says so
			}
			i += 4
			switch {
			case r >= 0xd800 && r < 0xdc00: // a high surrogate needs its low half next
				if i+2 >= len(body) || body[i+1] != '\\' || body[i+2] != 'u' {
					return false
				}
				low, ok := hex4(body, i+3)
				if !ok || low < 0xdc00 || low >= 0xe000 {
					return false
				}
				i += 6
			case r >= 0xdc00 && r < 0xe000:
				return false
			case (r < 0x20 || r == 0x7f) && !strings.ContainsRune(allowMultiLine, r):
				return false
			}
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape at body[i:].
func hex4(body []byte, i int) (rune, bool) {
	if i+4 > len(body) {
		return 0, false
	}
	var r rune
	for _, h := range body[i : i+4] {
		switch {
		case h >= '0' && h <= '9':
			r = r<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			r = r<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			r = r<<4 | rune(h-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// cleanText reports whether s is UTF-8 without NUL and without control characters (C0
// and DEL) other than those in allow.
func cleanText(s, allow string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		// In valid UTF-8 a byte below 0x80 is always a character of its own.
		if b := s[i]; (b < 0x20 || b == 0x7f) && strings.IndexByte(allow, b) < 0 {
			return false
		}
	}
	return true
}

// cleanValues checks every name and value of v; allow says what a field's value may
// carry besides text. When it refuses a value it names its field, unless the name is
// itself refused.
func cleanValues(v url.Values, allow func(name string) string) (field string, ok bool) {
	for name, values := range v {
		if !cleanText(name, allowNone) {
			return "", false
		}
		for _, value := range values {
			if !cleanText(value, allow(name)) {
				return name, false
			}
		}
	}
	return "", true
}

// badInput is the edge's 400 with a message for the person who sent it.
func badInput(message string) error { return errs.Explain(errs.ErrBadRequest, message) }

package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/errs"
	"gantry/models/idempotency"
	"gantry/views/paths"
)

// IdempotencyKeys runs a keyed request once and replays its outcome to repeats
// (models/idempotency.Store).
type IdempotencyKeys interface {
	Do(ctx context.Context, req idempotency.Request, fn func(ctx context.Context) (idempotency.Outcome, error)) (idempotency.Outcome, bool, error)
}

// readOnlyPosts are the POST routes that change nothing: the request and change forms'
// live checks (htmx posts the whole form as it is typed, key and all) and a group rule's
// preview (its form's Add button then spends the key).
var readOnlyPosts = map[string]bool{paths.ValidateRequest(): true, paths.PreviewRequest(): true,
	paths.RouteWorkspaceChangePreview: true, paths.PreviewGroupRule(): true, paths.APIGroupRulesPreview(): true}

// ReplayedHeader marks an API answer replayed from an earlier call with the same key.
const ReplayedHeader = "Idempotent-Replayed"

// errNotKept ends a keyed request's transaction without keeping its key: the handler
// answered a refusal itself (a form drawn again with its field messages), so the key may
// be used again once corrected.
var errNotKept = errors.New("answer not kept")

// idempotent makes every mutating request of a member take effect once (DESIGN §10):
// forms carry a fresh key in a hidden field (CSRFField), API calls an Idempotency-Key
// header (400 INVALID_INPUT without one). The key is reserved, the handler runs and its
// answer is recorded in one transaction its services join, so a change and its key
// commit together; the answer is held back until then. A repeat with the same key and
// the same request gets the recorded answer again (a form: the same redirect and flash;
// the API: the same status and body, with Idempotent-Replayed: true) and nothing runs; the
// same key with another request is refused (422); a refused or failed request keeps no
// key. Keys are per member and organization, and forgotten after idempotency.TTL.
func (s *Server) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if methodNeedsNoCSRF(c.Request().Method) || s.keys == nil || readOnlyPosts[c.Path()] {
			return next(c)
		}
		req, err := keyedRequest(c)
		if err != nil {
			return err
		}
		outer := c.Request().Context()
		res := c.Response()
		original := res.Writer
		rec := &recorder{header: original.Header().Clone()}
		var flash struct{ kind, message string }
		render.OnFlash(c, func(kind, message string) { flash.kind, flash.message = kind, message })

		out, replayed, err := s.keys.Do(outer, req, func(ctx context.Context) (idempotency.Outcome, error) {
			c.SetRequest(c.Request().WithContext(ctx))
			res.Writer = rec
			defer func() { res.Writer = original }()
			if err := next(c); err != nil {
				return idempotency.Outcome{}, err
			}
			if rec.status == 0 || rec.status >= http.StatusBadRequest {
				return idempotency.Outcome{}, errNotKept
			}
			return outcomeOf(c, req, rec, flash.kind, flash.message), nil
		})
		// The transaction is over: what follows (an error page) must not use it.
		c.SetRequest(c.Request().WithContext(outer))
		switch {
		case errors.Is(err, errNotKept) || (err == nil && !replayed):
			return rec.flushTo(original)
		case err != nil:
			res.Committed, res.Status, res.Size = false, 0, 0 // the handler's answer was not sent: the error's is
			return err
		}
		return replay(c, req, out)
	}
}

// keyedRequest reads the key and fingerprints the request: the API's method, path,
// content type and body; a form's method, path and fields (files by content).
func keyedRequest(c echo.Context) (idempotency.Request, error) {
	r := c.Request()
	if strings.HasPrefix(r.URL.Path, "/api/") {
		key := r.Header.Get(idempotency.Header)
		if key == "" {
			v := &errs.Validation{}
			v.Add(idempotency.Header, "Every call that changes something carries an Idempotency-Key header: a fresh random value per intended change, sent again with a retry.")
			return idempotency.Request{}, withStatus(http.StatusBadRequest, v)
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return idempotency.Request{}, err // too large (413) or cut off
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		return idempotency.Request{API: true, Key: key,
			Hash: idempotency.FingerprintBody(r.Method, r.URL.RequestURI(), r.Header.Get(echo.HeaderContentType), body)}, nil
	}
	form, err := c.FormParams()
	if err != nil {
		return idempotency.Request{}, fmt.Errorf("reading the form: %v: %w", err, errs.ErrBadRequest)
	}
	fields := url.Values{}
	for k, vs := range form {
		fields[k] = vs
	}
	if r.MultipartForm != nil {
		for name, files := range r.MultipartForm.File {
			for _, fh := range files {
				f, err := fh.Open()
				if err != nil {
					return idempotency.Request{}, fmt.Errorf("reading an uploaded file: %v: %w", err, errs.ErrBadRequest)
				}
				sum := sha256.New()
				_, err = io.Copy(sum, f)
				f.Close()
				if err != nil {
					return idempotency.Request{}, fmt.Errorf("reading an uploaded file: %v: %w", err, errs.ErrBadRequest)
				}
				fields.Add("file:"+name, fh.Filename+" sha256:"+hex.EncodeToString(sum.Sum(nil)))
			}
		}
	}
	return idempotency.Request{Key: form.Get(idempotency.Field), Hash: idempotency.Fingerprint(r.Method, r.URL.Path, fields)}, nil
}

// outcomeOf is what a repeat of the request gets. A form's redirect is replayed with
// its flash; a form answered with a page (a secret shown once, a confirmation) is
// replayed as a redirect to where the handler said (render.ReplayTo; else the form's
// own address) with a note that it was done, never with the page. An API answer is kept
// whole, unless the handler said it must not be (render.DoNotKeep) or it is too large.
func outcomeOf(c echo.Context, req idempotency.Request, rec *recorder, flashKind, flash string) idempotency.Outcome {
	if req.API {
		out := idempotency.Outcome{Status: rec.status, Location: rec.header.Get(echo.HeaderLocation), ContentType: rec.header.Get(echo.HeaderContentType)}
		if !render.NotKept(c) && rec.body.Len() <= idempotency.MaxBody {
			out.Body = bytes.Clone(rec.body.Bytes())
			if out.Body == nil {
				out.Body = []byte{}
			}
		}
		return out
	}
	switch {
	case rec.status >= 300 && rec.status < 400:
		return idempotency.Outcome{Status: rec.status, Location: rec.header.Get(echo.HeaderLocation), Flash: flash, FlashKind: flashKind}
	case rec.header.Get("HX-Redirect") != "":
		return idempotency.Outcome{Status: http.StatusSeeOther, Location: rec.header.Get("HX-Redirect"), Flash: flash, FlashKind: flashKind}
	}
	to := render.ReplayLocation(c)
	if to == "" {
		to = c.Request().URL.Path
	}
	return idempotency.Outcome{Status: http.StatusSeeOther, Location: to, FlashKind: "info",
		Flash: "This form was already sent, and it was done then: it was not done again."}
}

// replay answers a repeat with the recorded outcome.
func replay(c echo.Context, req idempotency.Request, out idempotency.Outcome) error {
	if !req.API {
		if out.Flash != "" {
			kind := out.FlashKind
			if kind == "" {
				kind = "success"
			}
			_ = render.Flash(c, kind, out.Flash)
		}
		return render.Redirect(c, out.Location)
	}
	h := c.Response().Header()
	h.Set(ReplayedHeader, "true")
	h.Set(echo.HeaderCacheControl, "no-store")
	if out.Location != "" {
		h.Set(echo.HeaderLocation, out.Location)
	}
	if out.Body == nil {
		return errs.Explain(errs.ErrConflict, "A request with this Idempotency-Key was already done; its answer is not kept (it was too large or held a secret). Read the result with a GET.")
	}
	if out.ContentType != "" {
		h.Set(echo.HeaderContentType, out.ContentType)
	}
	return c.Blob(out.Status, out.ContentType, out.Body)
}

// recorder holds a handler's answer until its transaction commits.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// flushTo sends the held answer.
func (r *recorder) flushTo(w http.ResponseWriter) error {
	h := w.Header()
	for k := range h {
		if _, ok := r.header[k]; !ok {
			delete(h, k)
		}
	}
	for k, vs := range r.header {
		h[k] = vs
	}
	if r.status == 0 {
		return nil
	}
	w.WriteHeader(r.status)
	_, err := w.Write(r.body.Bytes())
	return err
}

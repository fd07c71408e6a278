package handlers

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 is tofu's transfer checksum, not a security control
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/models/errs"
	"gantry/models/state"
)

// The OpenTofu http backend routes (tofu's address, lock_address and unlock_address).
// They live outside the browser session and CSRF middleware: tofu authenticates every
// request with the job's Basic-auth credential.
const (
	RouteState     = "/state/:workspace"
	RouteStateLock = "/state/:workspace/lock"
)

// Methods tofu uses for lock_address and unlock_address by default.
const (
	MethodLock   = "LOCK"
	MethodUnlock = "UNLOCK"
)

// DefaultMaxStateBytes bounds a state or LockInfo upload when State.MaxBytes is unset.
const DefaultMaxStateBytes = 64 << 20

// StateBackend is what the state backend routes need.
type StateBackend interface {
	Authenticate(ctx context.Context, username, password string) (state.Credential, error)
	Read(ctx context.Context, cred state.Credential, workspaceID string) ([]byte, error)
	Write(ctx context.Context, cred state.Credential, workspaceID, lockID string, data []byte) error
	Lock(ctx context.Context, cred state.Credential, workspaceID string, info []byte) error
	Unlock(ctx context.Context, cred state.Credential, workspaceID string, info []byte) error
}

// State serves the OpenTofu http state backend of every workspace.
type State struct {
	Backend  StateBackend
	MaxBytes int64
}

const credentialKey = "gantry.state.credential"

// Register adds the backend routes to g, which must not carry the session or CSRF
// middleware.
func (h State) Register(g *echo.Group) {
	auth := h.authenticate
	g.GET(RouteState, h.get, auth)
	g.POST(RouteState, h.put, auth)
	g.PUT(RouteState, h.put, auth) // tofu's update_method = "PUT"
	g.Add(MethodLock, RouteStateLock, h.lock, auth)
	g.Add(MethodUnlock, RouteStateLock, h.unlock, auth)
}

// authenticate resolves the Basic-auth credential; the service then decides what it
// may do. A 401 carries a challenge, as HTTP asks.
func (h State) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		user, pass, ok := c.Request().BasicAuth()
		if !ok {
			return stateError(c, fmt.Errorf("no credentials: %w", state.ErrBadCredentials))
		}
		cred, err := h.Backend.Authenticate(c.Request().Context(), user, pass)
		if err != nil {
			return stateError(c, err)
		}
		c.Set(credentialKey, cred)
		return next(c)
	}
}

func credential(c echo.Context) state.Credential {
	cred, _ := c.Get(credentialKey).(state.Credential)
	return cred
}

func (h State) get(c echo.Context) error {
	data, err := h.Backend.Read(c.Request().Context(), credential(c), c.Param("workspace"))
	if errors.Is(err, state.ErrNoState) {
		return c.NoContent(http.StatusNoContent)
	}
	if err != nil {
		return stateError(c, err)
	}
	sum := md5.Sum(data) //nolint:gosec // see import
	c.Response().Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

func (h State) put(c echo.Context) error {
	data, err := h.body(c)
	if err != nil {
		return err
	}
	err = h.Backend.Write(c.Request().Context(), credential(c), c.Param("workspace"), c.QueryParam("ID"), data)
	if err != nil {
		return stateError(c, err)
	}
	return c.NoContent(http.StatusOK)
}

func (h State) lock(c echo.Context) error {
	info, err := h.body(c)
	if err != nil {
		return err
	}
	if err := h.Backend.Lock(c.Request().Context(), credential(c), c.Param("workspace"), info); err != nil {
		return stateError(c, err)
	}
	return c.NoContent(http.StatusOK)
}

func (h State) unlock(c echo.Context) error {
	info, err := h.body(c)
	if err != nil {
		return err
	}
	err = h.Backend.Unlock(c.Request().Context(), credential(c), c.Param("workspace"), info)
	var locked *state.LockedError
	if errors.As(err, &locked) {
		// tofu counts only a 200 as unlocked; the holder's info says who has it instead.
		return c.JSONBlob(http.StatusConflict, locked.Holder)
	}
	if err != nil {
		return stateError(c, err)
	}
	return c.NoContent(http.StatusOK)
}

// body reads the request body within MaxBytes and checks it against Content-MD5, which
// tofu sends with every upload.
func (h State) body(c echo.Context) ([]byte, error) {
	limit := h.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxStateBytes
	}
	data, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", limit))
	}
	if raw := c.Request().Header.Get("Content-MD5"); raw != "" {
		want, err := base64.StdEncoding.DecodeString(raw)
		sum := md5.Sum(data) //nolint:gosec // see import
		if err != nil || !bytes.Equal(want, sum[:]) {
			return nil, echo.NewHTTPError(http.StatusBadRequest, "Content-MD5 does not match the body")
		}
	}
	return data, nil
}

// stateError answers with the status tofu's http backend client understands: a held
// lock is a 423 with the holder's LockInfo (tofu prints it), a refused state a 409, a
// malformed body a 400, a bad credential a 401 with a challenge, a credential that
// may not do this a 403, a database that is away a 503 (tofu retries it). Anything else
// goes to the central error handler.
func stateError(c echo.Context, err error) error {
	var locked *state.LockedError
	switch {
	case errors.As(err, &locked):
		return c.JSONBlob(http.StatusLocked, locked.Holder)
	case errors.Is(err, state.ErrMalformed):
		return echo.NewHTTPError(http.StatusBadRequest, err.Error()).SetInternal(err)
	case errors.Is(err, errs.ErrUnauthenticated):
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="gantry-state", charset="UTF-8"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "invalid state credentials").SetInternal(err)
	case errors.Is(err, errs.ErrForbidden):
		return echo.NewHTTPError(http.StatusForbidden, err.Error()).SetInternal(err)
	case errors.Is(err, errs.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound, "no such workspace").SetInternal(err)
	case errors.Is(err, errs.ErrConflict):
		return echo.NewHTTPError(http.StatusConflict, err.Error()).SetInternal(err)
	case state.Unavailable(err):
		// The database is away (restarting): tofu's http backend retries a 5xx
		// (TF_HTTP_RETRY_MAX, TF_HTTP_RETRY_WAIT_MAX: the runner raises both).
		c.Response().Header().Set("Retry-After", "2")
		return echo.NewHTTPError(http.StatusServiceUnavailable, "the state backend's database is unavailable; try again").SetInternal(err)
	}
	return err
}

//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/breakglass"
	"gantry/models/run"
	"gantry/sandbox/client"
)

// TestBreakglassCredentialsEndWithTheWindow (issue 36's acceptance): a break-glass
// window's credential, used as its holder would (the token the page showed, against the
// sandbox cloud that trusts Gantry), lists and changes the workspace's resources while
// the window is open, and is refused by the cloud on the very next call after "End the
// window now" (the acceptance allows one second; the cloud asks Gantry at every call, so
// there is no second to wait), for reading and changing alike. A second window's token is
// refused once its clock runs out, before its end job has run, and still after its end
// job and an owner's close. The refusals name the ended grant: the tokens' exp is still
// minutes away, so only Gantry's answer refuses them.
func TestBreakglassCredentialsEndWithTheWindow(t *testing.T) {
	t.Parallel()
	app := startLive(t)
	ctx := context.Background()
	cast := castOf(t, app)
	operator, admin, owner, staging, cloudAdmin := cast.operator, cast.admin, cast.owner, cast.staging, cast.cloudAdmin

	applied := waitForState(t, app.App, app.App.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	approve(t, app.App, admin, applied)
	ws := waitForState(t, app.App, applied.ID, run.Succeeded).WorkspaceID

	// openWindow asks for a window as the operator, has an admin approve it and opens it
	// through the pages, and returns it with a client holding the token the page showed.
	openWindow := func(reason string) (string, *client.Client) {
		id := askWindow(t, app.App, operator, ws, reason, 60)
		status, body := windowAct(t, app.App, admin, id, "approve", url.Values{"terms": {windowOf(t, app.App, id).TermsDigest}})
		require.Equal(t, http.StatusSeeOther, status, body)
		status, body = windowAct(t, app.App, operator, id, "open", nil)
		require.Equal(t, http.StatusOK, status, body)
		m := tokenArea.FindStringSubmatch(body)
		require.NotNil(t, m, "the page shows the window's credentials: %s", body)
		glass, err := client.New(app.cloudURL, strings.TrimSpace(m[1]))
		require.NoError(t, err)
		return id, glass
	}
	// use lists the workspace's buckets and changes one with the window's token.
	use := func(glass *client.Client, retention int) error {
		listed, err := glass.List(ctx, "bucket")
		if err != nil {
			return err
		}
		require.Len(t, listed, 1, "the workspace's bucket")
		attrs := configurable(t, "bucket", cloudObjectOf(t, ctx, cloudAdmin, "bucket", ws).Attributes)
		attrs["retention_days"] = retention
		_, err = glass.Update(ctx, "bucket", listed[0].ID, attrs)
		return err
	}
	// refused requires both a read and a change with the window's token to be refused
	// because its grant ended.
	refused := func(glass *client.Client, retention int, when string) {
		_, err := glass.List(ctx, "bucket")
		requireGrantEnded(t, err)
		attrs := configurable(t, "bucket", cloudObjectOf(t, ctx, cloudAdmin, "bucket", ws).Attributes)
		attrs["retention_days"] = retention
		_, err = glass.Update(ctx, "bucket", cloudObjectOf(t, ctx, cloudAdmin, "bucket", ws).ID, attrs)
		requireGrantEnded(t, err)
		require.NotEqual(t, retention, cloudObjectOf(t, ctx, cloudAdmin, "bucket", ws).Attributes["retention_days"], "nothing changed %s", when)
	}

	// Open, the token reads and changes; "End the window now", and the next call is refused.
	first, glass := openWindow("INC-36: bucket retention too short, raise it by hand")
	require.NoError(t, use(glass, 45))
	status, body := windowAct(t, app.App, operator, first, "end", nil)
	require.Equal(t, http.StatusSeeOther, status, body)
	require.Equal(t, breakglass.AwaitingCodification, windowOf(t, app.App, first).State)
	refused(glass, 60, "after the window was ended")
	// Its drift check runs on the workspace; the next window waits for it to be planned.
	waitForState(t, app.App, *windowOf(t, app.App, first).DriftCheckRunID, run.Planned)

	// A second window: refused once its clock runs out (its end job, scheduled at the end,
	// has not run yet), and still after that job ended it and an owner closed it.
	second, glass := openWindow("INC-37: bucket retention too short again, raise it by hand")
	require.NoError(t, use(glass, 50))
	require.NoError(t, app.DB.Exec("UPDATE breakglass_windows SET ends_at = now() WHERE id = ?", second).Error)
	require.Equal(t, breakglass.Open, windowOf(t, app.App, second).State)
	refused(glass, 70, "once the window's time was up")
	_, err := app.System.Breakglass.Due(ctx, second, breakglass.Open)
	require.NoError(t, err)
	require.Equal(t, breakglass.AwaitingCodification, windowOf(t, app.App, second).State)
	status, body = windowAct(t, app.App, owner, second, "close", url.Values{"reason": {"changed back by a forward fix instead"}})
	require.Equal(t, http.StatusSeeOther, status, body)
	require.Equal(t, breakglass.Closed, windowOf(t, app.App, second).State)
	refused(glass, 80, "after an owner closed the window")
}

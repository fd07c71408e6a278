package webtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/models/authz"
	"gantry/models/idempotency"
	"gantry/models/run"
)

// StopApply cancels run runID while it applies, as c would on its confirmation page
// (confirmed, with reason), and requires the answer to be the redirect to the run.
func (a *App) StopApply(t testing.TB, c *http.Client, runID, reason string) {
	t.Helper()
	resp := a.PostForm(t, c, "/runs/"+runID+"/cancel", url.Values{"_csrf": {a.CSRF(t, c)}, "idempotency_key": {idempotency.NewKey()},
		"confirm": {"yes"}, "reason": {reason}})
	body := ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
}

// WaitStopped waits until the worker of cancelled run runID recorded what its apply
// wrote (the run.apply_stopped audit event), within base of idle-machine time, and
// returns the run.
func (a *App) WaitStopped(t testing.TB, runID string, base time.Duration) run.Run {
	t.Helper()
	var r run.Run
	require.NoError(t, a.DB.Where("id = ?", runID).Take(&r).Error)
	wake, stop := a.Server.Changes.Subscribe(r.OrganizationID, runID)
	defer stop()
	bench.Eventually(t, "the stopped apply of run "+runID+" to be recorded", base, func() (bool, any) {
		var n int64
		require.NoError(t, a.DB.Raw("SELECT count(*) FROM audit_events WHERE target_id = ? AND action = 'run.apply_stopped'", runID).Scan(&n).Error)
		return n == 1, n
	}, bench.Wake(wake))
	require.NoError(t, a.DB.Where("id = ?", runID).Take(&r).Error)
	return r
}

// WaitLiveLog waits until the live log of run r's phase contains text, within base of
// idle-machine time (the live log is stored in chunks as the phase prints).
func (a *App) WaitLiveLog(t testing.TB, r run.Run, phase run.JobKind, text string, base time.Duration) {
	t.Helper()
	ctx := authz.WithSubject(context.Background(), authz.System(r.OrganizationID))
	bench.Eventually(t, "the "+string(phase)+" log of run "+r.ID+" to say "+text, base, func() (bool, any) {
		chunks, err := a.System.Runs.Reads.LogChunks(ctx, r.ID, phase, 0, 10000)
		require.NoError(t, err)
		var b strings.Builder
		for _, c := range chunks {
			b.WriteString(c.Text)
		}
		return strings.Contains(b.String(), text), bench.Later(b.String)
	}, bench.Poll(100*time.Millisecond))
}

// StateIDs are the ids of every resource instance in workspace wsID's newest stored
// state (decrypted), sorted: what the next run of the workspace starts from.
func (a *App) StateIDs(t testing.TB, orgID, wsID string) []string {
	t.Helper()
	ctx, cancel := bench.Context(context.Background(), 10*time.Second)
	defer cancel()
	v, err := a.System.StateStore.Latest(ctx, orgID, wsID)
	require.NoError(t, err)
	data, _, err := a.System.Artifacts.Get(ctx, orgID, v.ArtifactID)
	require.NoError(t, err)
	var doc struct {
		Resources []struct {
			Mode      string `json:"mode"`
			Instances []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	var ids []string
	for _, r := range doc.Resources {
		if r.Mode != "managed" {
			continue
		}
		for _, i := range r.Instances {
			ids = append(ids, i.Attributes.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

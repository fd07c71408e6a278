package run

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// refreshOnlyPlan is the part of a refresh-only `tofu show -json` the drift check
// reads: a database resized by hand, a network deleted by hand, a no-op and a data
// source (neither is drift).
const refreshOnlyPlan = `{"format_version":"1.2","resource_drift":[
 {"address":"module.postgres.sandbox_database.this","mode":"managed","type":"sandbox_database","name":"this",
  "change":{"actions":["update"],"before":{"id":"db-1","size":"small","labels":{"a":"b","c":"d"},"storage_gb":20},
            "after":{"id":"db-1","size":"large","labels":{"c":"d","a":"b"},"storage_gb":20}}},
 {"address":"module.postgres.sandbox_network.this","mode":"managed","type":"sandbox_network","name":"this",
  "change":{"actions":["delete"],"before":{"id":"net-1","cidr":"10.0.0.0/16"},"after":null}},
 {"address":"module.postgres.sandbox_subnet.this","mode":"managed","type":"sandbox_subnet","name":"this",
  "change":{"actions":["no-op"],"before":{"id":"subnet-1"},"after":{"id":"subnet-1"}}},
 {"address":"data.sandbox_network.shared","mode":"data","type":"sandbox_network","name":"shared",
  "change":{"actions":["update"],"before":{"id":"net-9"},"after":{"id":"net-9","cidr":"x"}}}
],"resource_changes":[]}`

func TestDriftOfReadsManagedDriftWithChangedAttributes(t *testing.T) {
	t.Parallel()
	obs, err := DriftOf([]byte(refreshOnlyPlan))
	require.NoError(t, err)
	require.Equal(t, []Observed{
		{Address: "module.postgres.sandbox_database.this", Type: "sandbox_database", ID: "db-1", Action: "update", Changed: []string{"size"}},
		{Address: "module.postgres.sandbox_network.this", Type: "sandbox_network", ID: "net-1", Action: "delete"},
	}, obs)
	none, err := DriftOf([]byte(`{"format_version":"1.2"}`))
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = DriftOf([]byte(`not json`))
	require.Error(t, err)
}

// TestAttribute: drift is a window's only when every change the cloud recorded since
// the state was written was made through a break-glass window of the workspace; a
// change by the admin API, a static key, another workspace's window or a run, no
// record at all or an unreadable history make it unowned, and one unowned resource
// makes the whole check unowned.
func TestAttribute(t *testing.T) {
	t.Parallel()
	written := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	before, after, later := written.Add(-time.Hour), written.Add(time.Minute), written.Add(2*time.Minute)
	opened, ended := written.Add(30*time.Second), written.Add(90*time.Second)
	windows := map[string]WindowInfo{"bgw-1": {ID: "bgw-1", RequestedByName: "Olivia", Reason: "INC-42 failover", OpenedAt: &opened, EndedAt: &ended}}
	created := CloudChange{By: "run", Action: "create", Run: "run-1", Phase: "apply", At: before}
	glass := CloudChange{By: "breakglass", Action: "update", Window: "bgw-1", At: after}
	obs := func(changes ...CloudChange) Observed {
		return Observed{Address: "a.b", Type: "sandbox_database", ID: "db-1", Action: "update", Changes: changes}
	}

	got, status := attribute([]Observed{obs(created, glass)}, written, windows)
	require.Equal(t, DriftExpected, status)
	require.Equal(t, "bgw-1", got[0].WindowID)
	require.Equal(t, "Olivia, through break-glass window bgw-1 (INC-42 failover)", got[0].By)

	for name, c := range map[string]struct {
		o    Observed
		says string
	}{
		"admin API":          {obs(created, glass, CloudChange{By: "admin", Action: "update", Reason: "INC-7", At: later}), "the cloud's admin API, outside any run or window (reason given: INC-7)"},
		"static key":         {obs(CloudChange{By: "key", Subject: "key:key-1", At: after}), "a static API key (key:key-1), outside any run or window"},
		"another window":     {obs(CloudChange{By: "breakglass", Window: "bgw-9", At: after}), "break-glass window bgw-9, which is not this workspace's"},
		"a run, after state": {obs(CloudChange{By: "run", Run: "run-7", Phase: "apply", At: after}), "the apply of run run-7, after the state was written"},
		"after the window":   {obs(CloudChange{By: "breakglass", Window: "bgw-1", At: later}), "break-glass window bgw-1's credentials, outside the window (at 2026-12-01T10:02:00Z)"},
		"only older changes": {obs(created, CloudChange{By: "breakglass", Window: "bgw-1", At: before}), "nobody on record: the cloud recorded no change to it since the state was written"},
		"history unreadable": {Observed{Address: "a.b", Type: "sandbox_database", ID: "db-1", Action: "update", HistoryError: "503"}, "nobody on record: the cloud's change history could not be read (503)"},
	} {
		got, status := attribute([]Observed{obs(created, glass), c.o}, written, windows)
		require.Equal(t, DriftUnowned, status, name)
		require.Equal(t, "bgw-1", got[0].WindowID, name)
		require.Empty(t, got[1].WindowID, name)
		require.Equal(t, c.says, got[1].By, name)
	}

	got, status = attribute(nil, written, windows)
	require.Equal(t, DriftClean, status)
	require.Empty(t, got)
	require.Equal(t, "no drift: the live resources match state version 3", DriftSummary(Drift{Serial: 3}, DriftClean))
	require.Equal(t, "unowned drift: 2 resources differ from state version 3 (1 changed by nobody on record, 1 through a break-glass window)",
		DriftSummary(Drift{Serial: 3, Resources: []DriftedResource{{WindowID: "bgw-1"}, {}}}, DriftUnowned))
}

// TestGatedPlanOfACodification: a codification's gates judge its drift as the changes
// it makes (to state); every other run's plan is judged as it is.
func TestGatedPlanOfACodification(t *testing.T) {
	t.Parallel()
	gated, err := gatedPlan(Run{Kind: KindCodify}, []byte(refreshOnlyPlan))
	require.NoError(t, err)
	var doc struct {
		ResourceChanges []struct {
			Address string `json:"address"`
		} `json:"resource_changes"`
	}
	require.NoError(t, json.Unmarshal(gated, &doc))
	require.Len(t, doc.ResourceChanges, 4)
	require.Equal(t, "module.postgres.sandbox_database.this", doc.ResourceChanges[0].Address)

	same, err := gatedPlan(Run{Kind: KindApply}, []byte(refreshOnlyPlan))
	require.NoError(t, err)
	require.Equal(t, refreshOnlyPlan, string(same))
}

// TestCodificationIsAPersonsFourEyesDecision: the matrix may route a small change to
// self-service, but accepting changes made by hand into state always waits for a
// person other than whoever made them.
func TestCodificationIsAPersonsFourEyesDecision(t *testing.T) {
	t.Parallel()
	r := Run{Kind: KindCodify, RequiredApprover: "system", PriorRequesters: []string{"usr-maker"}}
	codifyFloor(&r)
	require.Equal(t, "operator", r.RequiredApprover)
	require.True(t, r.FourEyes)
	require.True(t, r.RequestedByUser("usr-maker"))
	other := Run{Kind: KindApply, RequiredApprover: "system"}
	codifyFloor(&other)
	require.Equal(t, "system", other.RequiredApprover)
	require.False(t, other.FourEyes)
}

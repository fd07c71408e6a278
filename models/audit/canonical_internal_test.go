package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// referenceCanonical is the canonical form through encoding/json, the definition the
// hand-written fast path must match byte for byte.
func referenceCanonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// referenceBody is an event's body through encoding/json.
func referenceBody(e Event) ([]byte, error) {
	data := json.RawMessage("{}")
	if e.Data != nil {
		var err error
		if data, err = referenceCanonical(e.Data); err != nil {
			return nil, err
		}
	}
	return json.Marshal(struct {
		OrganizationID string          `json:"organization_id"`
		Seq            int64           `json:"seq"`
		OccurredAt     string          `json:"occurred_at"`
		ActorID        string          `json:"actor_id"`
		ActorName      string          `json:"actor_name"`
		Action         string          `json:"action"`
		TargetType     string          `json:"target_type"`
		TargetID       string          `json:"target_id"`
		Data           json.RawMessage `json:"data"`
		EnvironmentID  string          `json:"environment_id,omitempty"`
		WorkspaceID    string          `json:"workspace_id,omitempty"`
		RunID          string          `json:"run_id,omitempty"`
	}{e.OrganizationID, e.Seq, e.OccurredAt.UTC().Format("2006-01-02T15:04:05.000000Z"), e.ActorID, e.ActorName, e.Action,
		e.TargetType, e.TargetID, data, e.EnvironmentID, e.WorkspaceID, e.RunID})
}

var canonicalSeeds = []string{
	`{}`, `[]`, `null`, `true`, `0`, `-0`, `1.0`, `1e5`, `-12.5E-3`, `9007199254740993`, `""`,
	`{"b":1,"a":[3,2,{"z":null,"y":false}],"big":9007199254740992}`,
	`{"a": 1, "a": 2}`,
	`{"html":"<b>&amp;</b>","ls":"\u2028\u2029","ctl":"\u0001\b\f\n\r\t","q":"\"\\\/"}`,
	`{"é":"caf\u00e9","emoji":"\ud83d\ude00","lone":"\ud800x","pair":"\ud83d\u0041"}`,
	"{\"raw\":\"\xff\xfe\",\"utf8\":\"na\u00efve \xe2\x80\xa8\"}",
	` { "spaced" : [ 1 , 2 ] , "k" : { } } `,
	`{"zz":1,"z":2,"Z":3,"_":4,"0":5,"":6}`,
}

func FuzzCanonical(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			_, err := appendCanonical(nil, raw)
			if err == nil {
				// The fast path may accept what encoding/json's first-value decoding does;
				// it must never accept what is not JSON at all.
				_, refErr := referenceCanonical(raw)
				require.NoError(t, refErr, "accepted %q", raw)
			}
			return
		}
		want, err := referenceCanonical(raw)
		require.NoError(t, err)
		got, err := appendCanonical(nil, raw)
		require.NoError(t, err, "%q", raw)
		require.Equal(t, string(want), string(got), "%q", raw)
	})
}

func TestBodyMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 1, 4, 5, 6, 789_000, time.UTC)
	for i, data := range append(canonicalSeeds, "") {
		e := Event{OrganizationID: "org-1", Seq: int64(i + 1), OccurredAt: at, ActorID: "usr-<1>", ActorName: "Zoë \"Z\" & co\u2028",
			Action: "run.approved", TargetType: "run", TargetID: "run-1", RunID: "run-1"}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		if i%2 == 0 {
			e.EnvironmentID, e.WorkspaceID = "env-1", "ws-\xff"
		}
		want, err := referenceBody(e)
		require.NoError(t, err)
		got, err := e.Body()
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%q", data)
	}
}

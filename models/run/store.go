package run

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/db"
)

// store holds the run aggregate's own queries: the runs and run_escalations tables
// (leaseTable and logTable hold the leases' and the live logs'). Everything else runs
// need comes through the interfaces in deps.go.
type store struct{ db *gorm.DB }

func (st store) conn(ctx context.Context) *gorm.DB { return db.Conn(ctx, st.db) }

// clock reads the database clock as it is now (clock_timestamp()), not when the
// transaction began (now()): every deadline is judged by it, after any lock was taken.
func (st store) clock(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := st.conn(ctx).Raw("SELECT clock_timestamp()").Scan(&t).Error; err != nil {
		return time.Time{}, fmt.Errorf("reading database clock: %w", err)
	}
	return t.UTC(), nil
}

// get reads run id; orgID "" is the system's lookup by id alone.
func (st store) get(ctx context.Context, orgID, id string) (Run, error) {
	return st.read(ctx, orgID, id, false)
}

// lock reads run id under a row lock held until the transaction in ctx ends.
func (st store) lock(ctx context.Context, orgID, id string) (Run, error) {
	return st.read(ctx, orgID, id, true)
}

func (st store) read(ctx context.Context, orgID, id string, forUpdate bool) (Run, error) {
	q := st.conn(ctx).Where("id = ?", id)
	if forUpdate {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	if orgID != "" {
		q = q.Where("organization_id = ?", orgID)
	}
	var r Run
	if err := q.Take(&r).Error; err != nil {
		return Run{}, fmt.Errorf("reading run %s: %w", id, db.Translate(err))
	}
	return r, nil
}

// save writes every column of r (a locked row): gorm's Updates(struct) would skip zero
// values, so the columns are selected explicitly.
func (st store) save(ctx context.Context, r Run) error {
	if err := st.conn(ctx).Model(&Run{}).Where("id = ?", r.ID).Select("*").Omit("id", "created_at").Updates(&r).Error; err != nil {
		return fmt.Errorf("saving run %s: %w", r.ID, db.Translate(err))
	}
	return nil
}

func (st store) create(ctx context.Context, r Run) error {
	if err := st.conn(ctx).Create(&r).Error; err != nil {
		return fmt.Errorf("creating run: %w", db.Translate(err))
	}
	return nil
}

// listQuery narrows a listing of one organization's runs.
type listQuery struct {
	orgID       string
	workspaceID string
	requestedBy string // a user id: the runs that user requested
	states      []State
	kinds       []Kind
	notKinds    []Kind
	// waiting: the runs waiting for a person's decision (PENDING_APPROVAL, or a soft
	// policy block waiting for an override).
	waiting bool
	// hidden are environments whose runs the reader may not see.
	hidden []string
	order  string
	limit  int
}

func (st store) list(ctx context.Context, q listQuery) ([]Run, error) {
	tx := st.conn(ctx).Where("organization_id = ?", q.orgID)
	if q.workspaceID != "" {
		tx = tx.Where("workspace_id = ?", q.workspaceID)
	}
	if q.requestedBy != "" {
		tx = tx.Where("requested_by = ?", q.requestedBy)
	}
	if len(q.states) > 0 {
		tx = tx.Where("state IN ?", q.states)
	}
	if len(q.kinds) > 0 {
		tx = tx.Where("kind IN ?", q.kinds)
	}
	if len(q.notKinds) > 0 {
		tx = tx.Where("kind NOT IN ?", q.notKinds)
	}
	if q.waiting {
		tx = tx.Where("(state = ? OR (state = ? AND policy_outcome <> 'hard_failed'))", PendingApproval, PolicyBlocked)
	}
	if len(q.hidden) > 0 {
		tx = tx.Where("environment_id NOT IN ?", q.hidden)
	}
	if q.limit > 0 {
		tx = tx.Limit(q.limit)
	}
	var runs []Run
	if err := tx.Order(q.order).Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return runs, nil
}

// waitingIn lists the runs of a workspace a new state version makes stale: those
// waiting for a decision (PENDING_APPROVAL, a soft POLICY_BLOCKED) and those approved
// but not yet applying.
func (st store) waitingIn(ctx context.Context, workspaceID string) ([]string, error) {
	var ids []string
	err := st.conn(ctx).Model(&Run{}).
		Where("workspace_id = ? AND (state IN ? OR (state = ? AND policy_outcome <> 'hard_failed'))", workspaceID,
			[]State{PendingApproval, Approved}, PolicyBlocked).
		Order("number").Pluck("id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("listing waiting runs: %w", err)
	}
	return ids, nil
}

// approvedBy lists the runs of an organization approved by userID that have not started
// applying.
func (st store) approvedBy(ctx context.Context, orgID, userID string) ([]string, error) {
	var ids []string
	err := st.conn(ctx).Model(&Run{}).Where("organization_id = ? AND state = ? AND approved_by = ?", orgID, Approved, userID).
		Order("created_at").Pluck("id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return ids, nil
}

// inApplyQueue is the rule of a workspace's apply queue, as SQL with its arguments: the
// runs on their way to apply (not dry runs or drift checks, which never apply), in
// order of their numbers. takeSlot and the queue a run page shows (queue.go) read it.
const inApplyQueue = "kind NOT IN ? AND state IN ?"

var applyQueueArgs = []any{[]Kind{KindPlanOnly, KindDrift}, []State{Queued, Planning, Approved}}

// earlierInQueue counts the runs of r's workspace requested before r that are on their
// way to apply: they apply first.
func (st store) earlierInQueue(ctx context.Context, r Run) (int64, error) {
	var n int64
	err := st.conn(ctx).Model(&Run{}).Where("workspace_id = ? AND number < ?", r.WorkspaceID, r.Number).
		Where(inApplyQueue, applyQueueArgs...).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("checking queue order: %w", err)
	}
	return n, nil
}

// applyQueue lists, by number, the runs of workspace workspaceID on their way to apply
// and the run holding its apply slot (slot, "" for none), in one query.
func (st store) applyQueue(ctx context.Context, workspaceID, slot string) ([]queuedRun, error) {
	var runs []queuedRun
	err := st.conn(ctx).Model(&Run{}).Select("id, number, state, kind").Where("workspace_id = ?", workspaceID).
		Where("(id = ? OR ("+inApplyQueue+"))", append([]any{slot}, applyQueueArgs...)...).
		Order("number").Scan(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("reading the apply queue: %w", err)
	}
	return runs, nil
}

// recordEscalation notes that run r's escalation for its decision row took effect;
// false when it was noted before (the job ran twice, or on two replicas).
func (st store) recordEscalation(ctx context.Context, r Run, escalation string, at time.Time) (bool, error) {
	res := st.conn(ctx).Exec(`INSERT INTO run_escalations (organization_id, run_id, level, escalation, escalated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, r.OrganizationID, r.ID, r.RiskLevel, escalation, at)
	if res.Error != nil {
		return false, fmt.Errorf("recording escalation: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// touch writes r's UpdatedAt alone: a change of the run that is none of its columns
// (an escalation: who may decide).
func (st store) touch(ctx context.Context, r Run) error {
	if err := st.conn(ctx).Model(&Run{}).Where("id = ?", r.ID).Update("updated_at", r.UpdatedAt).Error; err != nil {
		return fmt.Errorf("touching run %s: %w", r.ID, err)
	}
	return nil
}

// ChangesChannel is the LISTEN/NOTIFY channel of run changes.
const ChangesChannel = "gantry_run_changes"

// notify tells live run pages (over LISTEN/NOTIFY, delivered at commit).
func (st store) notify(ctx context.Context, r Run) error {
	payload, _ := json.Marshal(map[string]string{"run": r.ID, "workspace": r.WorkspaceID, "org": r.OrganizationID, "state": string(r.State)})
	if err := st.conn(ctx).Exec("SELECT pg_notify(?, ?)", ChangesChannel, string(payload)).Error; err != nil {
		return fmt.Errorf("notifying run change: %w", err)
	}
	return nil
}

// lockRuns locks runs ids in id order until the transaction in ctx ends: a transaction
// that changes several runs takes all their locks before its first audit event (the
// lock order of update).
func (st store) lockRuns(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var locked []string
	if err := st.conn(ctx).Raw("SELECT id FROM runs WHERE id IN ? ORDER BY id FOR UPDATE", ids).Scan(&locked).Error; err != nil {
		return fmt.Errorf("locking runs: %w", err)
	}
	return nil
}

// driftDueSQL picks, of the workspaces the filter names, those whose scheduled drift
// check is due: the newest run that wrote their state (not a destroy) finished before
// $before, no drift check started since, and none is queued or planning.
const driftDueSQL = `SELECT w.workspace_id FROM (
	SELECT DISTINCT ON (workspace_id) workspace_id, kind, COALESCE(finished_at, updated_at) AS at FROM runs
	WHERE %s AND new_state_version_id IS NOT NULL
	ORDER BY workspace_id, number DESC) w
WHERE w.kind <> 'destroy' AND w.at < @before AND NOT EXISTS (
	SELECT 1 FROM runs d WHERE d.workspace_id = w.workspace_id AND d.kind = 'drift_check'
	AND (d.created_at >= @before OR d.state IN ('QUEUED', 'PLANNING')))
ORDER BY w.workspace_id`

// driftDueIn lists the workspaces of environment envID whose drift check is due.
func (st store) driftDueIn(ctx context.Context, envID string, before time.Time) ([]string, error) {
	var ids []string
	err := st.conn(ctx).Raw(fmt.Sprintf(driftDueSQL, "environment_id = @id"), map[string]any{"id": envID, "before": before}).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("finding workspaces due for a drift check: %w", err)
	}
	return ids, nil
}

// driftDue reports whether workspaceID's drift check is due.
func (st store) driftDue(ctx context.Context, workspaceID string, before time.Time) (bool, error) {
	var ids []string
	err := st.conn(ctx).Raw(fmt.Sprintf(driftDueSQL, "workspace_id = @id"), map[string]any{"id": workspaceID, "before": before}).Scan(&ids).Error
	if err != nil {
		return false, fmt.Errorf("checking whether a drift check is due: %w", err)
	}
	return len(ids) > 0, nil
}

// newestDrift reads each workspace's newest drift check of organization orgID (none of
// the hidden environments), at most limit.
func (st store) newestDrift(ctx context.Context, orgID string, hidden []string, limit int) ([]Run, error) {
	q := st.conn(ctx).Model(&Run{}).Select("DISTINCT ON (workspace_id) *").Where("organization_id = ? AND kind = ?", orgID, KindDrift)
	if len(hidden) > 0 {
		q = q.Where("environment_id NOT IN ?", hidden)
	}
	var runs []Run
	if err := q.Order("workspace_id, number DESC").Limit(limit).Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("listing drift checks: %w", err)
	}
	return runs, nil
}

// driftCounts counts organization orgID's finished drift checks since since by finding.
func (st store) driftCounts(ctx context.Context, orgID string, since time.Time) (map[DriftStatus]int, error) {
	var rows []struct {
		DriftStatus DriftStatus
		N           int
	}
	err := st.conn(ctx).Model(&Run{}).Select("drift_status, count(*) AS n").
		Where("organization_id = ? AND kind = ? AND drift_status <> '' AND created_at >= ?", orgID, KindDrift, since).
		Group("drift_status").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("counting drift checks: %w", err)
	}
	out := map[DriftStatus]int{}
	for _, r := range rows {
		out[r.DriftStatus] = r.N
	}
	return out, nil
}

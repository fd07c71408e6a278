package audit

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"

	"gantry/models/authz"
	"gantry/models/db"
)

// checkpoint is one row of audit_checkpoints: how far an organization's chain has
// been verified.
type checkpoint struct {
	OrganizationID string `gorm:"primaryKey"`
	VerifiedSeq    int64
	VerifiedHash   []byte
	CheckedAt      time.Time
	BrokenSeq      *int64
	BrokenReason   string `gorm:"default:null"`
}

func (checkpoint) TableName() string { return "audit_checkpoints" }

// ChainState is what the history page says about the chain: verified up to
// VerifiedSeq of Head events, or broken at BrokenSeq.
type ChainState struct {
	Head         int64
	VerifiedSeq  int64
	CheckedAt    time.Time // zero when never checked
	BrokenSeq    int64     // 0 when no broken link was found
	BrokenReason string
}

// Intact reports whether no broken link has been found.
func (c ChainState) Intact() bool { return c.BrokenSeq == 0 }

// Chain returns the chain state of the subject's organization from its checkpoint (it
// verifies nothing itself). Reading it needs audit.read.
func (l *Log) Chain(ctx context.Context) (ChainState, error) {
	subject, err := authz.Require(ctx, authz.PermAuditRead)
	if err != nil {
		return ChainState{}, err
	}
	head, err := l.Head(ctx, subject.OrganizationID)
	if err != nil {
		return ChainState{}, err
	}
	var cps []checkpoint
	if err := db.Conn(ctx, l.db).Where("organization_id = ?", subject.OrganizationID).Limit(1).Find(&cps).Error; err != nil {
		return ChainState{}, fmt.Errorf("reading the audit checkpoint: %w", err)
	}
	state := ChainState{Head: head}
	if len(cps) == 1 {
		cp := cps[0]
		state.VerifiedSeq, state.CheckedAt, state.BrokenReason = cp.VerifiedSeq, cp.CheckedAt, cp.BrokenReason
		if cp.BrokenSeq != nil {
			state.BrokenSeq = *cp.BrokenSeq
		}
	}
	return state, nil
}

// checkBatch is how many events one step of Advance reads.
const checkBatch = 5000

// Advance verifies organization orgID's chain from its checkpoint on, up to budget
// events, each batch in a transaction of its own that moves the checkpoint. It stops
// at the first broken link and records it: the checkpoint then stays there. It is the
// periodic job's work and checks no permission.
func (l *Log) Advance(ctx context.Context, orgID string, budget int) (ChainState, error) {
	conn := db.Conn(ctx, l.db)
	seed := checkpoint{OrganizationID: orgID, CheckedAt: time.Now().UTC()}
	if err := conn.Clauses(clause.OnConflict{DoNothing: true}).Create(&seed).Error; err != nil {
		return ChainState{}, fmt.Errorf("creating the audit checkpoint: %w", err)
	}
	var state ChainState
	for done := 0; done < budget; {
		var moved int
		err := db.Tx(ctx, l.db, func(ctx context.Context) error {
			conn := db.Conn(ctx, l.db)
			var cp checkpoint
			// The row lock keeps two replicas' jobs from checking the same stretch.
			if err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ?", orgID).First(&cp).Error; err != nil {
				return fmt.Errorf("locking the audit checkpoint: %w", err)
			}
			state = ChainState{VerifiedSeq: cp.VerifiedSeq, BrokenReason: cp.BrokenReason}
			if cp.BrokenSeq != nil {
				state.BrokenSeq = *cp.BrokenSeq
				return nil
			}
			var events []Event
			if err := conn.Where("organization_id = ? AND seq > ?", orgID, cp.VerifiedSeq).Order("seq").
				Limit(min(checkBatch, budget-done)).Find(&events).Error; err != nil {
				return fmt.Errorf("reading audit events: %w", err)
			}
			for _, ev := range events {
				if reason := link(cp.VerifiedSeq, cp.VerifiedHash, ev); reason != "" {
					seq := cp.VerifiedSeq + 1
					cp.BrokenSeq, cp.BrokenReason = &seq, reason
					state.BrokenSeq, state.BrokenReason = seq, reason
					break
				}
				cp.VerifiedSeq, cp.VerifiedHash = ev.Seq, ev.Hash
			}
			moved = len(events)
			cp.CheckedAt = time.Now().UTC()
			state.VerifiedSeq, state.CheckedAt = cp.VerifiedSeq, cp.CheckedAt
			return conn.Save(&cp).Error
		})
		if err != nil {
			return ChainState{}, err
		}
		done += moved
		if moved == 0 || state.BrokenSeq != 0 {
			break
		}
	}
	head, err := l.Head(ctx, orgID)
	state.Head = head
	return state, err
}

// link checks that ev is the event after (seq, hash) and that its hash is its own; it
// returns why not, or "".
func link(seq int64, hash []byte, ev Event) string {
	if ev.Seq != seq+1 {
		return fmt.Sprintf("event %d is missing (the next event is %d)", seq+1, ev.Seq)
	}
	if !bytes.Equal(ev.PrevHash, hash) {
		return fmt.Sprintf("event %d does not link to event %d", ev.Seq, seq)
	}
	rebuilt, err := ev.Body()
	hashed := ev.HashedBody // what the hash covers; rebuilt where none is stored
	if hashed == nil {
		hashed = rebuilt
	}
	if err != nil || !bytes.Equal(ev.Hash, HashOf(ev.PrevHash, hashed)) {
		return fmt.Sprintf("event %d does not match its hash (it was altered)", ev.Seq)
	}
	// The stored body is what exports carry: it must be the one the columns make.
	if !bytes.Equal(hashed, rebuilt) {
		return fmt.Sprintf("event %d's stored body differs from its columns (it was altered)", ev.Seq)
	}
	return ""
}

// Organizations lists the organizations that have events, for the periodic check. It
// walks the (organization_id, seq) index one organization at a time (a loose index
// scan), so it does not read every event.
func (l *Log) Organizations(ctx context.Context) ([]string, error) {
	var ids []string
	err := db.Conn(ctx, l.db).Raw(`WITH RECURSIVE orgs AS (
	    (SELECT organization_id FROM audit_events ORDER BY organization_id LIMIT 1)
	    UNION ALL
	    SELECT (SELECT e.organization_id FROM audit_events e WHERE e.organization_id > orgs.organization_id ORDER BY e.organization_id LIMIT 1)
	    FROM orgs WHERE orgs.organization_id IS NOT NULL)
	SELECT organization_id FROM orgs WHERE organization_id IS NOT NULL`).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("listing organizations with audit events: %w", err)
	}
	return ids, nil
}

package run

import (
	"context"
	"encoding/json"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/keyring"
)

// The live log: while a phase runs, the worker stores its output as it arrives, in
// chunks already masked (runner.LiveLog), sealed like artifacts and announced on
// LogChannel in the transaction that stores them, so any replica's page can stream them
// from the database. The phase's whole log is still stored as an artifact when it ends
// (the evidence); chunks are only the view of a phase that has not ended yet.

// LogChannel is the LISTEN/NOTIFY channel announcing a new chunk of a run's live log.
const LogChannel = "gantry_run_log"

// phaseState is the state a run is in while each of its phases runs.
var phaseState = map[JobKind]State{JobPlan: Planning, JobApply: Running, JobVerify: Verifying}

// LivePhase reports whether phase k has a live log (plan, apply, verify).
func LivePhase(k JobKind) bool {
	_, ok := phaseState[k]
	return ok
}

// RunningPhase is the phase a run in state st is in the middle of (plan, apply or
// verify), if any: the one whose log is live and whose lease is held.
func (st State) RunningPhase() (JobKind, bool) {
	for phase, s := range phaseState {
		if s == st {
			return phase, true
		}
	}
	return "", false
}

// LogChunk is one piece of a phase's live log, in order: Seq counts from 1 in each
// phase, without gaps. Text is masked: it never holds a secret.
type LogChunk struct {
	Phase JobKind
	Seq   int
	Text  string
}

// Sealer is the envelope encryption chunks are sealed with (keyring.Keyring, as for
// artifacts).
type Sealer interface {
	Seal(plaintext, aad []byte) (keyring.Sealed, error)
	Open(s keyring.Sealed, aad []byte) ([]byte, error)
}

// logAAD binds a sealed chunk to its row: it opens only as that chunk of that phase of
// that run, so chunks cannot be swapped, reordered or moved to another run.
func logAAD(orgID, runID string, phase JobKind, seq int) []byte {
	return fmt.Appendf(nil, "run_log:%s:%s:%s:%d", orgID, runID, phase, seq)
}

// AppendLog stores text, a masked chunk of the live log of run r's phase, as its next
// chunk and announces it. The worker running the phase calls it, as the system.
func (s *Jobs) AppendLog(ctx context.Context, r Run, l Lease, text []byte) error {
	phase := l.Phase
	if _, ok := phaseState[phase]; !ok {
		return fmt.Errorf("a %s job has no live log", phase)
	}
	return s.k.inTx(ctx, func(ctx context.Context) error {
		// A worker whose lease was taken over writes nothing more, its log included.
		if err := s.k.leases.holds(ctx, l); err != nil {
			return err
		}
		seq, err := s.k.logs.nextLogSeq(ctx, r, phase)
		if err != nil {
			return err
		}
		sealed, err := s.k.keys.Seal(text, logAAD(r.OrganizationID, r.ID, phase, seq))
		if err != nil {
			return fmt.Errorf("sealing a live log chunk: %w", err)
		}
		return s.k.logs.insertLogChunk(ctx, r, phase, seq, sealed)
	})
}

// LogChunks returns the live log of phase of run id after chunk after, at most limit
// chunks, oldest first, for a person who may see the run (else errs.ErrNotFound, as for
// the run itself: asked again at every read, so a viewer who loses sight of the run
// mid-phase stops getting its log).
func (s *Reads) LogChunks(ctx context.Context, id string, phase JobKind, after, limit int) ([]LogChunk, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rows, err := s.k.logs.logChunks(ctx, r, phase, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]LogChunk, 0, len(rows))
	for _, row := range rows {
		text, err := s.k.keys.Open(keyring.Sealed{KeyID: row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext},
			logAAD(r.OrganizationID, r.ID, phase, row.Seq))
		if err != nil {
			return nil, fmt.Errorf("opening chunk %d of the %s log of run %s: %w", row.Seq, phase, r.ID, err)
		}
		out = append(out, LogChunk{Phase: phase, Seq: row.Seq, Text: string(text)})
	}
	return out, nil
}

// logTable holds the queries of run_log_chunks.
type logTable struct{ db *gorm.DB }

// logChunkRow is one row of run_log_chunks as read.
type logChunkRow struct {
	Seq        int
	KeyID      string
	WrappedKey []byte
	Nonce      []byte
	Ciphertext []byte
}

// nextLogSeq is the number of the next chunk of r's phase, taken under a transaction
// lock of that phase's log: a second writer (a rescued job whose first attempt still
// writes) waits, and never makes a gap or a duplicate.
func (st logTable) nextLogSeq(ctx context.Context, r Run, phase JobKind) (int, error) {
	conn := db.Conn(ctx, st.db)
	if err := conn.Exec("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", "run_log:"+r.ID+":"+string(phase)).Error; err != nil {
		return 0, fmt.Errorf("locking the %s log of run %s: %w", phase, r.ID, err)
	}
	var seq int
	err := conn.Raw("SELECT coalesce(max(seq), 0) + 1 FROM run_log_chunks WHERE organization_id = ? AND run_id = ? AND phase = ?",
		r.OrganizationID, r.ID, phase).Scan(&seq).Error
	if err != nil {
		return 0, fmt.Errorf("numbering a chunk of the %s log of run %s: %w", phase, r.ID, err)
	}
	return seq, nil
}

// insertLogChunk stores a sealed chunk and notifies LogChannel, delivered at commit.
func (st logTable) insertLogChunk(ctx context.Context, r Run, phase JobKind, seq int, sealed keyring.Sealed) error {
	conn := db.Conn(ctx, st.db)
	err := conn.Exec(`INSERT INTO run_log_chunks (organization_id, run_id, phase, seq, key_id, wrapped_key, nonce, ciphertext)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.OrganizationID, r.ID, phase, seq, sealed.KeyID, sealed.WrappedKey, sealed.Nonce, sealed.Ciphertext).Error
	if err != nil {
		return fmt.Errorf("storing chunk %d of the %s log of run %s: %w", seq, phase, r.ID, err)
	}
	payload, _ := json.Marshal(map[string]any{"org": r.OrganizationID, "run": r.ID, "phase": phase, "seq": seq})
	if err := conn.Exec("SELECT pg_notify(?, ?)", LogChannel, string(payload)).Error; err != nil {
		return fmt.Errorf("announcing a live log chunk: %w", err)
	}
	return nil
}

func (st logTable) logChunks(ctx context.Context, r Run, phase JobKind, after, limit int) ([]logChunkRow, error) {
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	var rows []logChunkRow
	err := db.Conn(ctx, st.db).Raw(`SELECT seq, key_id, wrapped_key, nonce, ciphertext FROM run_log_chunks
		WHERE organization_id = ? AND run_id = ? AND phase = ? AND seq > ? ORDER BY seq LIMIT ?`,
		r.OrganizationID, r.ID, phase, after, limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("reading the %s log of run %s: %w", phase, r.ID, err)
	}
	return rows, nil
}

// RewrapLogChunks re-wraps the data key of every live log chunk not sealed under keys'
// current key (`gantry keys rotate`), so older keys can be dropped; ciphertexts are
// untouched. Batches are their own transactions, each audited per organization as
// "keys.rewrapped"; it returns how many chunks it re-wrapped.
func RewrapLogChunks(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (int, error) {
	return rewrapInBatches(ctx, gdb, keys, "live_log_chunks", func(conn *gorm.DB, current string) (int, map[string]int, error) {
		var rows []struct {
			OrganizationID, RunID, Phase string
			Seq                          int
			KeyID                        string
			WrappedKey                   []byte
		}
		err := conn.Raw(`SELECT organization_id, run_id, phase, seq, key_id, wrapped_key FROM run_log_chunks WHERE key_id <> ?
			ORDER BY organization_id, run_id, phase, seq LIMIT ? FOR NO KEY UPDATE`, current, rewrapBatch).Scan(&rows).Error
		if err != nil {
			return 0, nil, fmt.Errorf("reading live log chunks to rotate: %w", err)
		}
		perOrg := map[string]int{}
		for _, r := range rows {
			re, err := keys.Rewrap(keyring.Sealed{KeyID: r.KeyID, WrappedKey: r.WrappedKey})
			if err != nil {
				return 0, nil, fmt.Errorf("re-wrapping chunk %d of the %s log of run %s: %w", r.Seq, r.Phase, r.RunID, err)
			}
			err = conn.Exec(`UPDATE run_log_chunks SET key_id = ?, wrapped_key = ?
				WHERE organization_id = ? AND run_id = ? AND phase = ? AND seq = ?`, re.KeyID, re.WrappedKey, r.OrganizationID, r.RunID, r.Phase, r.Seq).Error
			if err != nil {
				return 0, nil, fmt.Errorf("storing the re-wrapped key of chunk %d of the %s log of run %s: %w", r.Seq, r.Phase, r.RunID, err)
			}
			perOrg[r.OrganizationID]++
		}
		return len(rows), perOrg, nil
	})
}

package run

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/keyring"
	"gantry/models/secret"
)

// Sensitive template inputs (DESIGN §6: secrets never in generated files, plan JSON,
// logs or the database in clear). The config bundle declares each as a root variable
// marked sensitive and passes var.<name> to the template module; its value is sealed
// with the run (runs.variables_*, envelope encryption bound to the organization and
// the run) and reaches the runner of a plan or a verification only as the process
// environment TF_VAR_<name>. An apply needs none: OpenTofu keeps the values in the
// saved plan it applies (encrypted at rest like every artifact, never shown). A run
// made from another run's bundle gets that run's values, sealed again for itself. The
// worker gets them as secret.Variables, which logs, %v and JSON never show.

// variablesAAD binds a run's sealed values to its row: copied to another run (or
// another organization) they do not open.
func variablesAAD(orgID, runID string) []byte {
	return fmt.Appendf(nil, "run_variables:%s:%s", orgID, runID)
}

// sealVariables stores values (input name -> string, float64 or bool, as the catalog
// validated them) sealed for run r, in the transaction in ctx. No values: nothing.
func (s *core) sealVariables(ctx context.Context, r Run, values map[string]any) error {
	if len(values) == 0 {
		return nil
	}
	plain, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("encoding the sensitive inputs of run %s: %w", r.ID, err)
	}
	sealed, err := s.keys.Seal(plain, variablesAAD(r.OrganizationID, r.ID))
	if err != nil {
		return fmt.Errorf("sealing the sensitive inputs of run %s: %w", r.ID, err)
	}
	return s.store.setVariables(ctx, r, sealed)
}

// sensitiveValues are run r's sealed values, opened (nil when it has none: no
// sensitive input, or a run whose bundle still holds them as literals).
func (s *core) sensitiveValues(ctx context.Context, r Run) (map[string]any, error) {
	sealed, err := s.store.variables(ctx, r)
	if err != nil || sealed == nil {
		return nil, err
	}
	plain, err := s.keys.Open(*sealed, variablesAAD(r.OrganizationID, r.ID))
	if err != nil {
		return nil, fmt.Errorf("opening the sensitive inputs of run %s: %w", r.ID, err)
	}
	var values map[string]any
	if err := json.Unmarshal(plain, &values); err != nil {
		return nil, fmt.Errorf("reading the sensitive inputs of run %s: %w", r.ID, err)
	}
	return values, nil
}

// phaseSecrets are what a phase of run r (config, its bundle) needs of its sensitive
// inputs: the variables a plan or a verification hands its runner, and the values its
// live log masks: the sealed ones, and the literals an older bundle still holds.
func (s *Jobs) phaseSecrets(ctx context.Context, r Run, config []byte) (secret.Variables, []string, error) {
	values, err := s.k.sensitiveValues(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	vars, err := variablesOf(values)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return vars, slices.Concat(s.k.catalog.Secrets(r.TemplateName, config), secretsOf(values)), nil
}

// variablesOf turns sealed values into TF_VAR_ texts.
func variablesOf(values map[string]any) (secret.Variables, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(secret.Variables, len(values))
	for name, v := range values {
		switch x := v.(type) {
		case string:
			out[name] = x
		case float64:
			out[name] = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			out[name] = strconv.FormatBool(x)
		default:
			return nil, fmt.Errorf("sensitive input %s holds a %T, not a string, number or bool", name, v)
		}
	}
	return out, nil
}

// secretsOf are the texts a live log masks of sealed values: strings, and the decimal
// text of numbers. A bool has too few values for masking its text to hide anything,
// and masking every "true" would only garble the log (as catalog.Secrets).
func secretsOf(values map[string]any) []string {
	var out []string
	for _, v := range values {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case float64:
			out = append(out, strconv.FormatFloat(x, 'f', -1, 64))
		}
	}
	slices.Sort(out)
	return out
}

// configSource is the run whose config bundle a run about to be queued reuses (plan
// again and rollback: its source; a drift check, codification or correction: the run
// that wrote the state), whose sealed values it carries; nil for a bundle generated
// for it.
func (q queued) configSource() *Run {
	for _, from := range []*Run{q.writer, q.source} {
		if from != nil && from.ConfigArtifactID == q.configArtifactID {
			return from
		}
	}
	return nil
}

// setVariables stores run r's sealed values.
func (st store) setVariables(ctx context.Context, r Run, s keyring.Sealed) error {
	err := st.conn(ctx).Exec(`UPDATE runs SET variables_key_id = ?, variables_wrapped_key = ?, variables_nonce = ?, variables_ciphertext = ?
		WHERE organization_id = ? AND id = ?`, s.KeyID, s.WrappedKey, s.Nonce, s.Ciphertext, r.OrganizationID, r.ID).Error
	if err != nil {
		return fmt.Errorf("storing the sensitive inputs of run %s: %w", r.ID, db.Translate(err))
	}
	return nil
}

// variables reads run r's sealed values (nil: none).
func (st store) variables(ctx context.Context, r Run) (*keyring.Sealed, error) {
	var rows []struct {
		KeyID      *string
		WrappedKey []byte
		Nonce      []byte
		Ciphertext []byte
	}
	err := st.conn(ctx).Raw(`SELECT variables_key_id AS key_id, variables_wrapped_key AS wrapped_key, variables_nonce AS nonce,
		variables_ciphertext AS ciphertext FROM runs WHERE organization_id = ? AND id = ?`, r.OrganizationID, r.ID).Scan(&rows).Error
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the sensitive inputs of run %s: %w", r.ID, db.Translate(err))
	case len(rows) == 0:
		return nil, fmt.Errorf("reading the sensitive inputs of run %s: %w", r.ID, db.Translate(gorm.ErrRecordNotFound))
	case rows[0].KeyID == nil:
		return nil, nil
	}
	row := rows[0]
	return &keyring.Sealed{KeyID: *row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext}, nil
}

// RewrapRunVariables re-wraps the data key of every run's sealed sensitive inputs not
// sealed under keys' current key (`gantry keys rotate`), so older keys can be dropped;
// ciphertexts are untouched. Batches are their own transactions, each audited per
// organization as "keys.rewrapped"; it returns how many runs' values it re-wrapped.
func RewrapRunVariables(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (int, error) {
	return rewrapInBatches(ctx, gdb, keys, "run_variables", func(conn *gorm.DB, current string) (int, map[string]int, error) {
		var rows []struct {
			OrganizationID, ID string
			KeyID              string
			WrappedKey         []byte
		}
		err := conn.Raw(`SELECT organization_id, id, variables_key_id AS key_id, variables_wrapped_key AS wrapped_key FROM runs
			WHERE variables_key_id IS NOT NULL AND variables_key_id <> ? ORDER BY organization_id, id LIMIT ? FOR NO KEY UPDATE`,
			current, rewrapBatch).Scan(&rows).Error
		if err != nil {
			return 0, nil, fmt.Errorf("reading sealed sensitive inputs to rotate: %w", err)
		}
		perOrg := map[string]int{}
		for _, r := range rows {
			re, err := keys.Rewrap(keyring.Sealed{KeyID: r.KeyID, WrappedKey: r.WrappedKey})
			if err != nil {
				return 0, nil, fmt.Errorf("re-wrapping the sensitive inputs of run %s: %w", r.ID, err)
			}
			err = conn.Exec(`UPDATE runs SET variables_key_id = ?, variables_wrapped_key = ? WHERE organization_id = ? AND id = ?`,
				re.KeyID, re.WrappedKey, r.OrganizationID, r.ID).Error
			if err != nil {
				return 0, nil, fmt.Errorf("storing the re-wrapped key of the sensitive inputs of run %s: %w", r.ID, err)
			}
			perOrg[r.OrganizationID]++
		}
		return len(rows), perOrg, nil
	})
}

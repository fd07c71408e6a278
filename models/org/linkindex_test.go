package org

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/db/dbtest"
)

// TestLinkLookupsUseAnIndex: a sign-in and every directory change look people and
// rules up by a link or a group alone, across organizations (migration 00042). With
// sequential scans made a last resort, each lookup's plan reads through an index: none
// is a scan of the whole table, however many people and rules there are.
func TestLinkLookupsUseAnIndex(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	for name, query := range map[string]string{
		"the people a link names": gdb.ToSQL(func(tx *gorm.DB) *gorm.DB {
			var people []User
			return linkedTo(tx.Model(&User{}), "00000000-0000-0000-0000-000000000001").Find(&people)
		}),
		"the organizations a sign-in concerns": gdb.ToSQL(func(tx *gorm.DB) *gorm.DB {
			var ids []string
			return tx.Raw(concernedOrganizations, []string{"engineers", "/platform/approvers"}, []string{"org-1"}, "usr-1", SourceRule).Scan(&ids)
		}),
	} {
		var plan []string
		require.NoError(t, gdb.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
				return err
			}
			return tx.Raw("EXPLAIN " + query).Scan(&plan).Error
		}), name)
		require.NotContains(t, strings.Join(plan, "\n"), "Seq Scan", "%s: %s\n%s", name, query, strings.Join(plan, "\n"))
	}
}

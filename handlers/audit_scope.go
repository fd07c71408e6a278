package handlers

import (
	"maps"
	"slices"
	"time"

	"gantry/models/pages"
	"gantry/views"
)

// exportLookback is how far back an export starts when the filters set no start.
const exportLookback = 30 * 24 * time.Hour

// exportScope is what the audit history's export takes: the filters' range and filters
// (one set of dates: the filters'), the range made whole where they leave it open (from
// 30 days back, to now), and the filters in words.
func exportScope(page pages.AuditPage, props views.AuditProps, now time.Time) views.AuditExportScope {
	q := page.Query
	s := views.AuditExportScope{From: q.From, To: q.To}
	if s.From.IsZero() {
		s.From, s.OpenFrom = now.UTC().Add(-exportLookback).Truncate(time.Minute), true
	}
	if s.To.IsZero() {
		s.To, s.OpenTo = now.UTC().Add(time.Minute).Truncate(time.Minute), true
	}
	values := filterValues(q)
	values.Set("from", formValue(s.From))
	values.Set("to", formValue(s.To))
	for _, k := range slices.Sorted(maps.Keys(values)) {
		s.Fields = append(s.Fields, views.AuditChoice{Label: k, Value: values.Get(k)})
	}
	label := func(choices []views.AuditChoice, v string) string {
		if i := slices.IndexFunc(choices, func(c views.AuditChoice) bool { return c.Value == v }); i >= 0 {
			return choices[i].Label
		}
		return v
	}
	add := func(what, value string) { s.Filters = append(s.Filters, views.AuditChoice{Label: what, Value: value}) }
	if q.ActorID != "" {
		add("by", label(props.Members, q.ActorID))
	}
	if q.Action != "" {
		add("action", label(props.Actions, q.Action))
	}
	if q.EnvironmentID != "" {
		add("environment", label(props.Environments, q.EnvironmentID))
	}
	if q.WorkspaceID != "" {
		add("workspace", page.Shown.Workspace)
	}
	if q.RunID != "" {
		add("run", page.Shown.Run)
	}
	return s
}

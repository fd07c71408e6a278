package handlers

import (
	"gantry/models/pages"
	"gantry/models/workspace"
	"gantry/views"
	"gantry/views/paths"
)

// originProps is where the run of workspace ws comes from, as its page's header says it
// (nil: a request of its own).
func originProps(o *pages.RunOrigin, ws workspace.View) *views.RunOriginProps {
	if o == nil {
		return nil
	}
	p := &views.RunOriginProps{Rollback: o.Kind == pages.OriginRollback, Serial: o.Serial, TargetWorkspace: ws.Name,
		TargetEnvironment: ws.EnvironmentName}
	if o.Visible {
		p.SourceURL, p.SourceLabel, p.Workspace, p.Environment = paths.Run(o.RunID), o.Label, o.Workspace, o.Environment
		if o.AppliedAt != nil {
			p.AppliedAt = o.AppliedAt.UTC().Format("2006-01-02 15:04 UTC")
		}
	}
	return p
}

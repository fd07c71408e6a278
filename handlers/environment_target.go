package handlers

import (
	"github.com/labstack/echo/v4"

	"gantry/models/environment"
	"gantry/views"
)

// targetInput reads the environment form's target: nil when the form sends no kind
// (unchanged on edit, the sandbox cloud on create).
func targetInput(c echo.Context) *environment.Target {
	form, _ := c.FormParams()
	if _, sent := form["target_kind"]; !sent {
		return nil
	}
	t := environment.TargetFromFields(c.FormValue)
	return &t
}

// targetForm is the target fieldset holding t (as stored, or as typed).
func targetForm(t environment.Target) views.TargetFormProps {
	p := views.TargetFormProps{Kind: string(t.Kind), Values: t.Fields()}
	for _, k := range environment.TargetKinds {
		example := environment.Target{Kind: k, GCP: &environment.GCPTarget{Provider: "<provider>"}}
		p.Kinds = append(p.Kinds, views.TargetKindChoice{Value: string(k), Label: k.Label(), Trust: k.Trust(),
			DefaultAudience: example.DefaultAudience(), Exercised: k.Exercised()})
	}
	return p
}

// targetSummary is an environment's integration as the pages show it.
func targetSummary(i environment.Integration) views.TargetSummary {
	return views.TargetSummary{Kind: string(i.Kind), Label: i.Kind.Label(), Where: i.Where, Audience: i.Audience, Read: i.Read, Write: i.Write,
		Credentials: i.Credentials(), Exercised: i.Kind.Exercised()}
}

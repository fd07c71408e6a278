package handlers

import (
	"gantry/models/signin"
	"gantry/views"
)

// SignInClaims is a's diagnostics as the pages show them (nil: no sign-in recorded).
func SignInClaims(a *signin.Asserted) *views.SignInClaims {
	if a == nil {
		return nil
	}
	w := a.Words()
	c := &views.SignInClaims{At: a.At.Format("2006-01-02 15:04 UTC"), Email: w.Email, Name: w.Name, Verified: w.Verified,
		Verification: w.Verification, Groups: w.Groups}
	if w.UserInfo != "" {
		c.Notes = append(c.Notes, w.UserInfo)
	}
	for _, i := range w.Ignored {
		c.Notes = append(c.Notes, "left out, of an unexpected shape: "+i)
	}
	return c
}

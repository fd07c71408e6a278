package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/views"
	"gantry/views/paths"
)

// Mailbox is a development mail catcher as the caught-mail page reads it: gantry dev's
// SMTP catcher (web/devmail), which the web shell hands in. Handlers stand below the
// shell, so they name what they read instead of importing the catcher.
type Mailbox interface {
	// Caught is the catcher's address and the mail it caught, newest first.
	Caught() (addr string, mail []views.DevMailRow)
}

// DevMail shows what `gantry dev`'s SMTP catcher caught. Registered only by gantry dev.
type DevMail struct {
	Mailbox Mailbox
}

// Register adds the caught-mail page to g.
func (h DevMail) Register(g *echo.Group) { g.GET(paths.DevMail(), h.show) }

func (h DevMail) show(c echo.Context) error {
	addr, mail := h.Mailbox.Caught()
	p := views.DevMailProps{Addr: addr, Messages: mail}
	return render.Page(c, http.StatusOK, views.DevMail(p))
}

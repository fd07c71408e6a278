package handlers

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/views"
	"gantry/web/devmail"
	"gantry/web/paths"
	"gantry/web/render"
)

// DevMail shows what `gantry dev`'s SMTP catcher caught. Registered only by gantry dev.
type DevMail struct {
	Catcher *devmail.Catcher
}

// Register adds the caught-mail page to g.
func (h DevMail) Register(g *echo.Group) { g.GET(paths.DevMail(), h.show) }

func (h DevMail) show(c echo.Context) error {
	p := views.DevMailProps{Addr: h.Catcher.Addr()}
	for _, m := range h.Catcher.Messages() {
		p.Messages = append(p.Messages, views.DevMailRow{ID: m.ID, At: m.At, From: m.From, To: strings.Join(m.To, ", "),
			Subject: m.Subject, Text: m.Text, Event: m.Headers["X-Gantry-Event"]})
	}
	return render.Page(c, http.StatusOK, views.DevMail(p))
}

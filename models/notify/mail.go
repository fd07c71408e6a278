package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Mail is one notification mail to one person, queued as a job: what it says is fixed
// when the notice is fanned out.
type Mail struct {
	NoticeID string `json:"notice_id"`
	Event    Event  `json:"event"`
	UserID   string `json:"user_id"`
	To       string `json:"to"`
	ToName   string `json:"to_name,omitempty"`
	Subject  string `json:"subject"`
	Text     string `json:"text"`
}

// mailFor writes notice n about the run f to contact c.
func mailFor(n Notice, f Facts, c Contact, link, prefs string) Mail {
	if n.Window != nil {
		return windowMail(n, c, link, prefs)
	}
	var b strings.Builder
	name := c.Name
	if name == "" {
		name = c.Email
	}
	fmt.Fprintf(&b, "Hello %s,\n\n%s.\n", name, Headline(n, f))
	if n.Reason != "" {
		fmt.Fprintf(&b, "Why: %s\n", n.Reason)
	}
	b.WriteString("\n")
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-14s %s\n", k+":", v)
		}
	}
	line("Run", f.Label)
	line("Environment", strings.TrimSpace(f.Environment+" ("+f.Tier+")"))
	line("Template", f.Template)
	if f.Kind == "destroy" {
		line("Kind", "destroy (removes every resource of the workspace)")
	}
	line("Requested by", f.Requester)
	line("Risk", riskWords[f.RiskLevel])
	line("Changes", f.Changes())
	line("Cost", f.CostDelta)
	if asksADecision(n.Event) {
		if f.Deadline != nil {
			line("Decide by", f.Deadline.UTC().Format("2006-01-02 15:04 UTC"))
		}
		fmt.Fprintf(&b, "\nReview it: %s\n\n", link)
		b.WriteString("Nothing is decided by following this link: the review page shows the plan and asks you to decide there.\n")
	} else {
		// An outcome (applied, decided, failed…) asks nothing of the reader.
		fmt.Fprintf(&b, "\nSee the run: %s\n\n", link)
	}
	if prefs != "" {
		fmt.Fprintf(&b, "Choose which mail Gantry sends you: %s\n", prefs)
	}
	return Mail{NoticeID: n.ID, Event: n.Event, UserID: c.UserID, To: c.Email, ToName: c.Name,
		Subject: "[Gantry] " + Headline(n, f), Text: b.String()}
}

// riskWords say a run's risk level in a mail as its badge does ("risk 2 · high"); the
// webhook payload keeps the level's code.
var riskWords = map[string]string{
	"0": "0 · nothing changes", "1": "1 · low", "1-protected": "1 · low, in a protected environment",
	"2": "2 · high", "3": "3 · critical",
}

// asksADecision is whether notices of event e ask their reader to decide something.
func asksADecision(e Event) bool { return e == DecisionWaiting || e == DecisionEscalated }

// SMTPConfig says how Gantry reaches its mail server.
type SMTPConfig struct {
	// Addr is host:port of the SMTP server ("" = no e-mail).
	Addr string
	From string
	// Username and Password authenticate (PLAIN, only over TLS unless TLS is "none").
	Username string
	Password string
	// TLS: "starttls" (required, the default), "opportunistic", "tls" (implicit, port
	// 465 style) or "none" (a local catcher only).
	TLS     string
	Timeout time.Duration
}

// Validate says what is wrong with c, by flag name.
func (c SMTPConfig) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil || host == "" {
		return fmt.Errorf("--smtp-addr %q: want host:port", c.Addr)
	}
	if _, err := strconv.Atoi(port); err != nil {
		return fmt.Errorf("--smtp-addr %q: the port is not a number", c.Addr)
	}
	if c.From == "" {
		return errors.New("--smtp-from is required with --smtp-addr")
	}
	switch c.TLS {
	case "", "starttls", "opportunistic", "tls", "none":
	default:
		return fmt.Errorf("--smtp-tls %q: want starttls, opportunistic, tls or none", c.TLS)
	}
	return nil
}

// SMTPMailer sends mail over SMTP with go-mail, one connection per mail (notifications
// are few; a pooled connection would outlive a server restart badly).
type SMTPMailer struct{ cfg SMTPConfig }

// NewSMTPMailer checks cfg and returns the mailer.
func NewSMTPMailer(cfg SMTPConfig) (*SMTPMailer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 15 * time.Second
	}
	return &SMTPMailer{cfg: cfg}, nil
}

// Send delivers m.
func (s *SMTPMailer) Send(ctx context.Context, m Mail) error {
	host, portText, _ := net.SplitHostPort(s.cfg.Addr)
	port, _ := strconv.Atoi(portText)
	opts := []gomail.Option{gomail.WithPort(port), gomail.WithTimeout(s.cfg.Timeout)}
	switch s.cfg.TLS {
	case "none":
		opts = append(opts, gomail.WithTLSPortPolicy(gomail.NoTLS), gomail.WithPort(port))
	case "opportunistic":
		opts = append(opts, gomail.WithTLSPortPolicy(gomail.TLSOpportunistic), gomail.WithPort(port))
	case "tls":
		opts = append(opts, gomail.WithSSLPort(false), gomail.WithPort(port))
	default:
		opts = append(opts, gomail.WithTLSPortPolicy(gomail.TLSMandatory), gomail.WithPort(port))
	}
	if s.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	client, err := gomail.NewClient(host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	msg := gomail.NewMsg()
	if err := msg.From(s.cfg.From); err != nil {
		return fmt.Errorf("--smtp-from: %w", err)
	}
	if err := msg.AddToFormat(m.ToName, m.To); err != nil {
		return fmt.Errorf("mail to %s: %w", m.UserID, err)
	}
	msg.Subject(m.Subject)
	msg.SetMessageID()
	msg.SetDate()
	msg.SetGenHeader("X-Gantry-Event", string(m.Event))
	msg.SetGenHeader("X-Gantry-Notice", m.NoticeID)
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("sending mail %s to %s: %w", m.NoticeID, m.UserID, err)
	}
	return nil
}

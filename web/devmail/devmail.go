// Package devmail is `gantry dev`'s local SMTP catcher: a mail server on loopback that
// keeps what it is sent in memory (the newest MaxKept messages) and delivers nothing,
// so the whole notification loop (a decision waits, the approver's mail, its link to
// the review page) can be followed on one machine. Never part of `gantry serve`.
package devmail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// MaxKept bounds the messages the catcher keeps; older ones are dropped.
const MaxKept = 200

// maxMessage bounds one message (notifications are a few kilobytes).
const maxMessage = 1 << 20

// Message is one caught mail, decoded for reading.
type Message struct {
	ID      int
	At      time.Time
	From    string
	To      []string
	Subject string
	Text    string
	Headers map[string]string // the X-Gantry-* headers
}

// Catcher is the SMTP server and what it caught.
type Catcher struct {
	server *smtp.Server
	ln     net.Listener

	mu   sync.Mutex
	next int
	kept []Message
	// changed is closed and replaced when a message arrives (tests wait on it).
	changed chan struct{}
}

// Listen starts a catcher on addr ("127.0.0.1:0" picks a port).
func Listen(addr string) (*Catcher, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for dev mail on %s: %w", addr, err)
	}
	c := &Catcher{ln: ln, changed: make(chan struct{})}
	s := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{c: c}, nil }))
	s.Domain = "gantry-dev.localhost"
	s.MaxMessageBytes = maxMessage
	s.MaxRecipients = 50
	s.ReadTimeout, s.WriteTimeout = 30*time.Second, 30*time.Second
	c.server = s
	go func() { _ = s.Serve(ln) }()
	return c, nil
}

// Addr is host:port the catcher listens on (--smtp-addr).
func (c *Catcher) Addr() string { return c.ln.Addr().String() }

// Close stops the server.
func (c *Catcher) Close() error { return c.server.Close() }

// Messages are the caught mails, newest first.
func (c *Catcher) Messages() []Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Message, len(c.kept))
	for i, m := range c.kept {
		out[len(c.kept)-1-i] = m
	}
	return out
}

// Wait returns the first caught mail, oldest first, for which match is true, waiting
// until one arrives or ctx ends.
func (c *Catcher) Wait(ctx context.Context, match func(Message) bool) (Message, error) {
	for {
		c.mu.Lock()
		changed := c.changed
		for _, m := range c.kept {
			if match(m) {
				c.mu.Unlock()
				return m, nil
			}
		}
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return Message{}, fmt.Errorf("waiting for mail: %w", ctx.Err())
		}
	}
}

func (c *Catcher) keep(m Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	m.ID = c.next
	c.kept = append(c.kept, m)
	if len(c.kept) > MaxKept {
		c.kept = c.kept[len(c.kept)-MaxKept:]
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// session is one SMTP conversation.
type session struct {
	c    *Catcher
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(io.LimitReader(r, maxMessage+1))
	if err != nil {
		return err
	}
	if len(raw) > maxMessage {
		return errors.New("message too large")
	}
	m, err := parse(raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, Message: "unreadable message: " + err.Error()}
	}
	m.From, m.To, m.At = s.from, append([]string(nil), s.to...), time.Now()
	s.c.keep(m)
	return nil
}

// parse reads a single-part text message as go-mail writes it.
func parse(raw []byte) (Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, err
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		subject = msg.Header.Get("Subject")
	}
	var body io.Reader = msg.Body
	if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(msg.Body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return Message{}, err
	}
	headers := map[string]string{}
	for k, v := range msg.Header {
		if strings.HasPrefix(k, "X-Gantry-") && len(v) > 0 {
			headers[k] = v[0]
		}
	}
	return Message{Subject: subject, Text: strings.ReplaceAll(string(text), "\r\n", "\n"), Headers: headers}, nil
}

// Package smtpd is a loopback SMTP server for tests, built on github.com/emersion/go-smtp: it
// offers STARTTLS with a certificate of a per-run CA (testutil.NewPKI) unless told not to,
// AUTH PLAIN (only over TLS) when users are given, and records every message it accepts and
// every MAIL command it sees, so a test asserts what a notifier really sent.
package smtpd

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/actgate/actgate/test/testutil"
)

// Options configures a Server.
type Options struct {
	// NoSTARTTLS: the server does not offer STARTTLS (a notifier must send nothing).
	NoSTARTTLS bool
	// Users, when set, are the AUTH PLAIN credentials (username → password) and MAIL is refused
	// without AUTH.
	Users map[string]string
	// Dir receives the CA file; default t.TempDir().
	Dir string
}

// Mail is one accepted message.
type Mail struct {
	From string
	To   []string
	// Data is the raw message as received (headers and body).
	Data []byte
	// TLS: the message came over a TLS connection; AuthUser is who authenticated ("" none).
	TLS      bool
	AuthUser string
}

// Server is a running SMTP server on 127.0.0.1.
type Server struct {
	srv    *smtp.Server
	addr   string
	caFile string
	users  map[string]string

	mu         sync.Mutex
	mails      []Mail
	mailCmds   int
	sessions   int
	authFailed int
	arrived    chan struct{}
}

// Start starts a server; it stops on t.Cleanup.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	dir := o.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	s := &Server{users: o.Users, arrived: make(chan struct{}, 1024)}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		s.mu.Lock()
		s.sessions++
		s.mu.Unlock()
		return &session{s: s, c: c}, nil
	}))
	s.srv.Domain = "smtp.test"
	s.srv.ReadTimeout, s.srv.WriteTimeout = 10*time.Second, 10*time.Second
	s.srv.MaxMessageBytes = 1 << 20
	s.srv.ErrorLog = log.New(io.Discard, "", 0) // a connection may end after the test
	if !o.NoSTARTTLS {
		pki := testutil.NewPKI(t, dir)
		s.caFile = pki.CAFile
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{pki.Cert}, MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(l)
	}()
	t.Cleanup(func() {
		// Closing l too ends Serve even when Close ran before Serve registered l.
		_ = s.srv.Close()
		_ = l.Close()
		<-done
	})
	return s
}

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// CAFile is the PEM file of the CA that signed the server's certificate ("" without STARTTLS).
func (s *Server) CAFile() string { return s.caFile }

// Mails returns the messages accepted so far.
func (s *Server) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mails)
}

// MailCommands counts the MAIL commands the server saw, accepted or not.
func (s *Server) MailCommands() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mailCmds
}

// Sessions counts the connections that reached the greeting.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Wait returns once n messages were accepted, or fails t after timeout.
func (s *Server) Wait(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if m := s.Mails(); len(m) >= n {
			return m
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("smtpd: %d messages after %v, want %d", len(s.Mails()), timeout, n)
		}
	}
}

type session struct {
	s        *Server
	c        *smtp.Conn
	authUser string
	from     string
	to       []string
}

var errAuth = &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication failed"}

func (ss *session) AuthMechanisms() []string {
	if ss.s.users == nil {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if mech != sasl.Plain || ss.s.users == nil {
		return nil, smtp.ErrAuthUnsupported
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if want, ok := ss.s.users[username]; !ok || want != password || (identity != "" && identity != username) {
			ss.s.mu.Lock()
			ss.s.authFailed++
			ss.s.mu.Unlock()
			return errAuth
		}
		ss.authUser = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.s.mu.Lock()
	ss.s.mailCmds++
	ss.s.mu.Unlock()
	if ss.s.users != nil && ss.authUser == "" {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if ss.from == "" || len(ss.to) == 0 {
		return errors.New("smtpd: DATA without MAIL and RCPT")
	}
	_, isTLS := ss.c.TLSConnectionState()
	ss.s.mu.Lock()
	ss.s.mails = append(ss.s.mails, Mail{From: ss.from, To: slices.Clone(ss.to), Data: b, TLS: isTLS, AuthUser: ss.authUser})
	ss.s.mu.Unlock()
	select {
	case ss.s.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (ss *session) Reset() { ss.from, ss.to = "", nil }

func (ss *session) Logout() error { return nil }

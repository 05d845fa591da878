package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"time"
)

// sendMail sends one message over one SMTP session: EHLO, STARTTLS (required: ErrNoSTARTTLS
// when the server does not offer it, before anything else is sent), AUTH PLAIN when configured,
// then MAIL, RCPT and DATA. The attempt is bounded by AttemptTimeout and ctx.
func (n *Notifier) sendMail(ctx context.Context, to string, msg []byte) error {
	n.attempts.Add(1)
	e := n.email
	ctx, cancel := context.WithTimeout(ctx, n.opts.AttemptTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.Addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	defer c.Close()
	hello := e.Hello
	if hello == "" {
		hello = "localhost"
	}
	if err := c.Hello(hello); err != nil {
		return fmt.Errorf("EHLO: %w", err)
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return ErrNoSTARTTLS
	}
	if err := c.StartTLS(&tls.Config{ServerName: e.ServerName, RootCAs: e.roots, MinVersion: tls.VersionTLS12}); err != nil {
		return fmt.Errorf("STARTTLS: %w", err)
	}
	if e.AuthFile != "" {
		user, pass, err := readAuth(e.AuthFile)
		if err != nil {
			return err
		}
		// smtp.PlainAuth sends the credentials only over TLS and only to ServerName's host.
		if err := c.Auth(smtp.PlainAuth("", user, pass, e.host)); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if err := c.Mail(e.From); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	_ = c.Quit() // the message is accepted once DATA ends with 250
	return nil
}

// retryableSMTP: network failures and 4xx replies are transient (RFC 5321 §4.2.1); a 5xx
// reply, a missing STARTTLS, a certificate the CA file does not vouch for and a bad credentials
// file are not.
func retryableSMTP(err error) bool {
	var te *textproto.Error
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case err == nil, errors.Is(err, ErrNoSTARTTLS), errors.Is(err, ErrAuthFile),
		errors.As(err, &ce), errors.As(err, &ue), errors.As(err, &he):
		return false
	case errors.As(err, &te):
		return te.Code >= 400 && te.Code < 500
	}
	return true
}

// retrying runs try up to MaxAttempts times while it fails with a retryable error, waiting the
// wait it asks for (0: the jittered exponential backoff) between attempts; it returns the
// number of attempts made.
func (n *Notifier) retrying(ctx context.Context, try func(ctx context.Context) (wait time.Duration, retry bool, err error)) (int, error) {
	var last error
	for attempt := 1; attempt <= n.opts.MaxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return attempt - 1, fmt.Errorf("%w: %w", ErrGaveUp, err)
		}
		wait, retry, err := try(ctx)
		if err == nil {
			return attempt, nil
		}
		last = err
		if !retry {
			return attempt, err
		}
		if attempt == n.opts.MaxAttempts {
			break
		}
		if wait <= 0 {
			wait = n.opts.Jitter(n.backoff(attempt))
		}
		if err := n.opts.Sleep(ctx, wait); err != nil {
			return attempt, fmt.Errorf("%w: %w (last: %w)", ErrGaveUp, err, last)
		}
	}
	return n.opts.MaxAttempts, fmt.Errorf("%w (%d attempts): %w", ErrGaveUp, n.opts.MaxAttempts, last)
}

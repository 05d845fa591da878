package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/actgate/actgate/internal/approval"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/gateconfig"
)

// gateBackends maps a sign-in at the approval page to one of the gate's principals (the
// configured claim, with the configured prefix) and lists and resolves through the gate's
// moments API with that principal's token, exactly as 'actgate console --as PRINCIPAL' does.
type gateBackends struct {
	cfg *gateconfig.Config
}

// For implements approval.Backends.
func (g gateBackends) For(_ context.Context, s approval.SignIn) (string, console.Backend, error) {
	a := g.cfg.Approval
	v, _ := s.Claims[a.PrincipalClaim].(string)
	if v == "" {
		return "", nil, fmt.Errorf("the ID token carries no %s claim", a.PrincipalClaim)
	}
	if a.PrincipalClaim == "email" && s.Claims["email_verified"] != true {
		return "", nil, errors.New("the provider has not verified the email address")
	}
	principal := a.PrincipalPrefix + v
	if !slices.ContainsFunc(g.cfg.Principals, func(p gateconfig.Principal) bool { return p.Name == principal }) {
		return "", nil, fmt.Errorf("%s is not a principal of this gate", principal)
	}
	c, err := (&apiFlags{dataDir: g.cfg.DataDir, as: principal}).client()
	if err != nil {
		return "", nil, fmt.Errorf("the gate holds no token for %s", principal)
	}
	return principal, consoleBackend{c}, nil
}

// startApproval serves the approval page of cfg.Approval until ctx ends; a listener that fails
// later is logged.
func startApproval(ctx context.Context, cfg *gateconfig.Config, log logr.Logger) (*approval.Service, error) {
	a := cfg.Approval
	secret := ""
	if a.ClientSecretFile != "" {
		b, err := os.ReadFile(a.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("approval.clientSecretFile: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	issuer := &http.Client{Timeout: 30 * time.Second}
	if a.CAFile != "" {
		pem, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, fmt.Errorf("approval.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("approval.caFile: %s holds no PEM certificate", a.CAFile)
		}
		issuer.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	session, stepUp := a.Lifetimes()
	svc, err := approval.New(approval.Options{ExternalURL: a.ExternalURL, Issuer: a.Issuer, ClientID: a.ClientID, ClientSecret: secret,
		IssuerClient: issuer, Backends: gateBackends{cfg}, Surface: "actgate serve", SessionLifetime: session, StepUpMaxAge: stepUp,
		Log: log.WithName("approval")})
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	ln, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return nil, fmt.Errorf("approval.listen: %w", err)
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	go func() {
		var err error
		if a.TLSCertFile != "" {
			err = srv.ServeTLS(ln, a.TLSCertFile, a.TLSKeyFile)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "The approval page stopped serving")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving the approval page", "address", ln.Addr().String(), "externalURL", a.ExternalURL, "issuer", a.Issuer)
	return svc, nil
}

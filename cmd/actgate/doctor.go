package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/fileutil"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/standalone"
)

// doctorTimeout bounds each upstream's check.
const doctorTimeout = 5 * time.Second

// newDoctorCmd is `actgate doctor`: what `actgate serve` needs, checked before (or beside) it.
func newDoctorCmd(s streams) *cobra.Command {
	var configFile string
	cmd := &cobra.Command{
		Use:   "doctor --config FILE",
		Short: "Check what the standalone gate needs: config, data dir, upstreams, principals",
		Long: `Check, without starting the gate, what 'actgate serve --config FILE' needs, and print per
check OK or the problem in words with what to change:

  config       the file parses and validates (every problem, one line per field)
  data dir     dataDir exists and is writable (or can be created)
  upstream S   each policy server S answers an MCP initialize: reachable, its TLS verifies
               (system roots, or SSL_CERT_FILE), and it accepts the configured credential
  principals   a principal is configured for every name the policy's rules escalate to
  identity provider  (agent.authentication oauth) the issuer's metadata and signing keys are
               reachable

The reason codes (UpstreamUnreachable, UpstreamTLSFailure, UpstreamRefused, UpstreamBadURL)
are those of docs/operations.md "Troubleshooting a pod that does not start". Exit status:
0 every check passed (WARN and SKIP lines do not fail); 1 a check failed; 2 usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := doctorStandalone(cmd.Context(), configFile, http.DefaultTransport.(*http.Transport).Clone())
			if failed := diag.Print(s.out, checks); failed > 0 {
				return fail(exitRejected, fmt.Sprintf("DOCTOR_FAILED %d of %d checks failed", failed, len(checks)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "the gate's configuration file (YAML)")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// doctorStandalone runs the standalone checks with tr as the upstreams' transport.
func doctorStandalone(ctx context.Context, configFile string, tr http.RoundTripper) []diag.Check {
	cfg, err := gateconfig.Load(configFile)
	if err != nil {
		var es gateconfig.Errors
		if errors.As(err, &es) {
			checks := make([]diag.Check, 0, len(es))
			for _, e := range es {
				checks = append(checks, diag.Fail("config", "", e.Error(), "correct "+e.Field+" in "+configFile))
			}
			return checks
		}
		return []diag.Check{diag.Fail("config", "", err.Error(), "give --config the gate's YAML configuration file")}
	}
	checks := []diag.Check{diag.OK("config", fmt.Sprintf("%s parses: %d servers, %d rules, %d principals",
		configFile, len(cfg.Policy.Servers), len(cfg.Policy.Rules), len(cfg.Principals)))}
	checks = append(checks, checkDataDir(cfg.DataDir))
	hc := &http.Client{Transport: tr, Timeout: doctorTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, srv := range cfg.Policy.Servers {
		checks = append(checks, checkUpstream(ctx, hc, cfg, srv))
	}
	if cfg.Agent.Authentication == gateconfig.AuthOAuth {
		checks = append(checks, checkIdentityProvider(ctx, cfg))
	}
	return append(checks, checkPrincipals(cfg))
}

// checkIdentityProvider: with agent.authentication oauth, the issuer's metadata names it and
// its key set holds signing keys the gate can use.
func checkIdentityProvider(ctx context.Context, cfg *gateconfig.Config) diag.Check {
	const name = "identity provider"
	v, err := standalone.OAuthVerifier(cfg)
	if err != nil {
		return diag.Fail(name, "", err.Error(), "correct agent.oauth in the configuration")
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	n, err := v.Check(ctx)
	switch {
	case err != nil:
		return diag.Fail(name, "", fmt.Sprintf("%s: %v", cfg.Agent.OAuth.Issuer, err),
			"make the issuer reachable from this machine (its TLS verifies against the system roots or agent.oauth.caFile), "+
				"or correct agent.oauth.issuer / jwksURL; until then every agent is refused (EF_AGENT_IDP_UNAVAILABLE)")
	case n == 0:
		return diag.Fail(name, "", cfg.Agent.OAuth.Issuer+" publishes no signing key", "check the provider's key set (jwks_uri)")
	}
	return diag.OK(name, fmt.Sprintf("%s publishes %d signing keys; agents' tokens need aud %s", cfg.Agent.OAuth.Issuer, n, cfg.Agent.OAuth.Audience))
}

// checkDataDir: the directory exists and takes a file, or its nearest existing parent does.
func checkDataDir(dir string) diag.Check {
	probeIn := dir
	created := false
	for {
		st, err := os.Stat(probeIn)
		if err == nil {
			if !st.IsDir() {
				return diag.Fail("data dir", "", probeIn+" is not a directory", "set dataDir to a directory the gate's user owns")
			}
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return diag.Fail("data dir", "", err.Error(), "set dataDir to a directory the gate's user can read and write")
		}
		parent := filepath.Dir(probeIn)
		if parent == probeIn {
			break
		}
		probeIn, created = parent, true
	}
	f, err := os.CreateTemp(probeIn, ".actgate-doctor-*")
	if err != nil {
		return diag.Fail("data dir", "", fmt.Sprintf("%s is not writable: %v", probeIn, err),
			"set dataDir to a directory the gate's user can write (it holds the store, the receipt log and the keys)")
	}
	name := f.Name()
	_ = f.Close()
	_ = os.Remove(name)
	if created {
		return diag.OK("data dir", dir+" does not exist yet; the gate creates it (mode 0700) in "+probeIn)
	}
	return diag.OK("data dir", dir+" is writable")
}

// checkUpstream: the server answers an MCP initialize with the configured credential.
func checkUpstream(ctx context.Context, hc *http.Client, cfg *gateconfig.Config, srv v1alpha1.ToolServer) diag.Check {
	name := "upstream " + srv.Name
	token := ""
	if file := cfg.Upstream(srv.Name).BearerTokenFile; file != "" {
		t, err := fileutil.ReadToken(file)
		if err != nil {
			return diag.Fail(name, diag.UpstreamRefused, fmt.Sprintf("credential %s: %v", file, err),
				"write the server's token to "+file+" (upstreams[].bearerTokenFile), readable by the gate's user")
		}
		token = t
	}
	ctx, cancel := context.WithTimeout(ctx, doctorTimeout)
	defer cancel()
	reason, detail := diag.ProbeMCP(ctx, hc, srv.URL, token)
	shown := srv.URL
	if u, err := url.Parse(srv.URL); err == nil {
		shown = u.Redacted() // never a password in the URL's user info
	}
	if reason == "" {
		return diag.OK(name, detail+" at "+shown)
	}
	fix := diag.Fix[reason]
	switch reason {
	case diag.UpstreamTLSFailure:
		fix = "the server's certificate is not trusted here: add its CA to the system roots or run the gate with SSL_CERT_FILE=ca.pem, " +
			"or fix the server's name or chain"
	case diag.UpstreamRefused:
		if token == "" {
			fix = "give the server's token in upstreams[] (server: " + srv.Name + ", bearerTokenFile: FILE)"
		} else {
			fix = "the token in " + cfg.Upstream(srv.Name).BearerTokenFile + " is not accepted by the server: write a valid one (it is read again on change)"
		}
	case diag.UpstreamUnreachable, diag.UpstreamBadURL:
		fix = "start your MCP server, or correct policy.servers[" + srv.Name + "].url (its streamable HTTP endpoint)"
	}
	return diag.Fail(name, reason, detail+" ("+shown+")", fix)
}

// checkPrincipals: every principal a rule names is configured, so a moment addressed to them
// can be resolved through the local API.
func checkPrincipals(cfg *gateconfig.Config) diag.Check {
	named := map[string]bool{}
	for _, r := range cfg.Policy.Rules {
		if r.Evidence != nil {
			for _, p := range r.Evidence.Principals {
				named[p] = true
			}
		}
	}
	var missing []string
	for p := range named {
		if !cfg.Principal(p) {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	switch {
	case len(missing) > 0:
		return diag.Fail("principals", "", "the policy escalates to "+strings.Join(missing, ", ")+", not configured: their moments could never be resolved",
			"add them under principals: (- name: "+missing[0]+"); the gate writes each one's token in dataDir")
	case len(named) == 0 && len(cfg.Principals) == 0:
		return diag.OK("principals", "none configured, and no rule escalates to a person")
	case len(named) == 0:
		return diag.Warn("principals", fmt.Sprintf("%d configured, but no rule escalates to any of them", len(cfg.Principals)),
			"name them in a rule's evidence.principals, or remove them")
	}
	return diag.OK("principals", fmt.Sprintf("every principal the rules name is configured (%d)", len(named)))
}

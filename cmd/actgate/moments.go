package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/actgate/actgate/internal/cli/momentsapi"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/standalone"
)

// ---- the CLI side: actgate moments, actgate resolve ----

// apiFlags locate the gate and the principal's token.
type apiFlags struct {
	server, config, dataDir, as, tokenFile string
}

func (f *apiFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", "", "the gate's URL (default: DATA_DIR/endpoint, else http://"+gateconfig.DefaultListen+")")
	cmd.Flags().StringVar(&f.config, "config", "", "the gate's configuration file, to find its data dir")
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "the gate's data dir (default: $ACTGATE_DATA_DIR, else ./actgate-data)")
	cmd.Flags().StringVar(&f.as, "as", "", "the principal to act as (default: the only one with a token in the data dir)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", "", "the principal's token file (default: DATA_DIR/principals/PRINCIPAL.token)")
}

// client resolves the flags into an API client.
func (f *apiFlags) client() (*apiClient, error) {
	dir := f.dataDir
	if dir == "" && f.config != "" {
		cfg, err := gateconfig.Load(f.config)
		if err != nil {
			return nil, configError(err)
		}
		dir = cfg.DataDir
	}
	if dir == "" {
		dir = os.Getenv("ACTGATE_DATA_DIR")
	}
	if dir == "" {
		dir = "actgate-data"
	}
	c := &apiClient{Server: f.server, Principal: f.as, HTTP: &http.Client{Timeout: 30 * time.Second}}
	if c.Server == "" {
		if b, err := os.ReadFile(filepath.Join(dir, gateconfig.EndpointFile)); err == nil {
			c.Server = strings.TrimSpace(string(b))
		} else {
			c.Server = "http://" + gateconfig.DefaultListen
		}
	}
	if u, err := url.Parse(c.Server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("--server %q is not an http URL", c.Server)
	}
	tokenFile := f.tokenFile
	if tokenFile == "" {
		if c.Principal == "" {
			names, _ := filepath.Glob(filepath.Join(dir, gateconfig.PrincipalsDir, "*.token"))
			switch len(names) {
			case 0:
				return nil, fail(exitUsage, fmt.Sprintf("USAGE no principal token in %s: pass --data-dir, --config or --token-file", filepath.Join(dir, gateconfig.PrincipalsDir)))
			case 1:
				c.Principal = strings.TrimSuffix(filepath.Base(names[0]), ".token")
			default:
				return nil, usageError("several principals have tokens in %s: pass --as", filepath.Join(dir, gateconfig.PrincipalsDir))
			}
		}
		tokenFile = filepath.Join(dir, gateconfig.PrincipalsDir, c.Principal+".token")
	}
	tok, err := standalone.ReadPrivate(tokenFile)
	if err != nil {
		return nil, fail(exitUsage, "USAGE principal token: "+err.Error())
	}
	c.Token = strings.TrimSpace(string(tok))
	return c, nil
}

// apiClient speaks the moments API as one principal (internal/cli/momentsapi).
type apiClient = momentsapi.Client

func newMomentsCmd(s streams) *cobra.Command {
	var (
		f      apiFlags
		all    bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "moments [--server URL] [--as PRINCIPAL]",
		Short: "List the binding moments awaiting you at a running gate",
		Long: `List the pending binding moments addressed to a principal at a running 'actgate serve',
each rendered in full: synopsis, findings, recommendations and offer, the question with every
option, its reasoning and the action digest it authorises, the recommended option marked,
and the escape hatches and decline (envelope-04 §9.1). Resolve one with 'actgate resolve'.

Under each option, "Runs (verified by actgate)" shows the exact call it authorises as the gate
holds it — tool, server and arguments — checked against the option's action digest: labels and
reasoning are the agent's words, the call is what runs. Values a policy masks are shown masked
(the digest still binds them). A call longer than the terminal bound is cut and marked
TRUNCATED; read it whole with --json or on the web console before choosing it.

The principal is authenticated by its token file in the gate's data dir
(DATA_DIR/principals/PRINCIPAL.token).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ms, err := c.Moments(cmd.Context(), all)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(s.out)
				enc.SetIndent("", "  ")
				return enc.Encode(ms)
			}
			if len(ms) == 0 {
				fmt.Fprintf(s.out, "No pending binding moments for %s.\n", c.Principal)
				return nil
			}
			for i, m := range ms {
				if i > 0 {
					fmt.Fprintln(s.out)
				}
				if err := printMoment(s.out, m); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "include resolved and expired moments")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the API's JSON")
	return cmd
}

// printMoment renders one moment with every envelope-04 §9.1 invariant (the envelope
// package's text renderer) and how to resolve it.
func printMoment(w io.Writer, m standalone.MomentJSON) error {
	env, err := envelope.Parse(m.Envelope)
	if err != nil {
		// A malformed envelope is never presented as a decision (envelope-04 §4, §12.8).
		return fail(exitRejected, "MOMENT_MALFORMED "+m.ID+": "+err.Error())
	}
	if env.Digest() != m.EnvelopeDigest {
		return fail(exitRejected, "MOMENT_MALFORMED "+m.ID+": the envelope does not have the digest the gate reported")
	}
	if err := envelope.CheckCalls(env, m.Calls); err != nil {
		// What an option runs is part of the decision: without the calls, or with calls that
		// are not the options', no decision is shown.
		return fail(exitRejected, "MOMENT_MALFORMED "+m.ID+": "+err.Error())
	}
	fmt.Fprintf(w, "MOMENT %s\n", m.ID)
	fmt.Fprintf(w, "  agent %s, session %s", m.Agent, m.Session)
	if m.Tool != "" {
		fmt.Fprintf(w, ", call %s on %s", m.Tool, m.Server)
	}
	fmt.Fprintf(w, "\n  for %s; expires %s", strings.Join(m.Principals, ", "), m.Expires.Format(time.RFC3339))
	if m.Resolved {
		fmt.Fprintf(w, "; resolved: %s", m.Resolution)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	r := envelope.TextRenderer{Calls: m.Calls, AgentAuthored: !m.GateAuthored}
	if err := r.Render(w, env); err != nil {
		return err
	}
	if !m.Resolved {
		fmt.Fprintf(w, "\nResolve: actgate resolve %s --option N", m.ID)
		if env.Hatches().FreeText {
			fmt.Fprint(w, " | --answer TEXT")
		}
		if env.Hatches().Dialogue {
			fmt.Fprint(w, " | --question")
		}
		fmt.Fprintln(w, " | --decline")
	}
	return nil
}

func newResolveCmd(s streams) *cobra.Command {
	var (
		f                 apiFlags
		option            int
		answer            string
		question, decline bool
		optionSet, ansSet bool
	)
	cmd := &cobra.Command{
		Use:   "resolve ID --option N | --answer TEXT | --question | --decline [--as PRINCIPAL]",
		Short: "Resolve a binding moment at a running gate",
		Long: `Resolve a binding moment as a principal, with exactly one of the four resolutions of
envelope-04 §7.3:

  --option N     choose option N (numbered from 1, as 'actgate moments' shows them); when
                 enough principals chose it, authority is issued for exactly that call
  --answer TEXT  answer in your own words instead (the answer-space hatch)
  --question     reject the question as put and reopen deliberation (the question-space hatch)
  --decline      answer no to the question as put; none of its actions will run

The resolution names the envelope's digest, read from the gate, so it cannot be applied to
another envelope.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			optionSet, ansSet = cmd.Flags().Changed("option"), cmd.Flags().Changed("answer")
			n := 0
			for _, b := range []bool{optionSet, ansSet, question, decline} {
				if b {
					n++
				}
			}
			if n != 1 {
				return usageError("give exactly one of --option, --answer, --question, --decline")
			}
			if optionSet && option < 1 {
				return usageError("--option is numbered from 1")
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			m, err := c.Moment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			body := map[string]any{"envelope_digest": m.EnvelopeDigest}
			switch {
			case optionSet:
				body["resolution"], body["option_idx"] = "option", option-1
			case ansSet:
				body["resolution"], body["answer"] = "answer", answer
			case question:
				body["resolution"] = "question"
			default:
				body["resolution"] = "declined"
			}
			raw, err := json.Marshal(map[string]any{envelope.MemberResolution: body})
			if err != nil {
				return err
			}
			r, err := c.Resolve(cmd.Context(), m.ID, raw)
			if err != nil {
				return err
			}
			switch {
			case r.Kind == "option" && r.Pending:
				fmt.Fprintf(s.out, "VOTE RECORDED %s option %d by %s: %d of %d principals\n", r.MomentID, option, c.Principal, r.Votes, r.Required)
			case r.Kind == "option" && r.AuthorityID != "":
				fmt.Fprintf(s.out, "RESOLVED %s option %d by %s: authority %s issued for exactly that call\n", r.MomentID, option, c.Principal, r.AuthorityID)
			case r.Kind == "option":
				fmt.Fprintf(s.out, "RESOLVED %s option %d by %s\n", r.MomentID, option, c.Principal)
			default:
				fmt.Fprintf(s.out, "RESOLVED %s %s by %s\n", r.MomentID, r.Kind, c.Principal)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&option, "option", 0, "choose option N (from 1)")
	cmd.Flags().StringVar(&answer, "answer", "", "answer in your own words")
	cmd.Flags().BoolVar(&question, "question", false, "reject the question as put")
	cmd.Flags().BoolVar(&decline, "decline", false, "answer no to the question as put")
	return cmd
}

// ---- the web console: actgate console ----

// codeMomentDigestMismatch: the gate reported an envelope digest other than the envelope's
// own; the console discards such an envelope (envelope-04 §6.2, §12.5).
const codeMomentDigestMismatch envelope.Code = "MOMENT_DIGEST_MISMATCH"

// codeMomentCallsMismatch: the calls the gate reported are missing or are not the calls the
// options' action digests name; the console shows no decision then.
const codeMomentCallsMismatch envelope.Code = "MOMENT_CALLS_MISMATCH"

// consoleBackend is the web console's console.Backend for a running gate: the local moments
// API, as the principal whose token the client holds. The gate authenticates every call, so
// the console can list and resolve exactly what that principal could with 'actgate moments'
// and 'actgate resolve'.
type consoleBackend struct{ c *apiClient }

var _ console.Backend = consoleBackend{}

// List implements console.Backend.
func (b consoleBackend) List(ctx context.Context) ([]console.Moment, error) {
	ms, err := b.c.Moments(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make([]console.Moment, 0, len(ms))
	for _, m := range ms {
		cm := console.Moment{
			ID: m.ID, Principal: b.c.Principal, Agent: m.Agent, Expires: m.Expires,
			Act:           console.Act{Name: m.ActID, Tool: m.Tool, Server: m.Server, Class: m.Class, ActionDigest: m.ActionDigest},
			AgentAuthored: !m.GateAuthored,
		}
		env, err := envelope.Parse(m.Envelope)
		switch {
		case err != nil:
			cm.Problems = envelope.ProblemsOf(err)
		case env.Digest() != m.EnvelopeDigest:
			cm.Problems = []envelope.Problem{{Code: codeMomentDigestMismatch, Path: "envelopeDigest",
				Message: fmt.Sprintf("the gate reported %s, but the envelope hashes to %s", m.EnvelopeDigest, env.Digest())}}
		default:
			if err := envelope.CheckCalls(env, m.Calls); err != nil {
				cm.Problems = []envelope.Problem{{Code: codeMomentCallsMismatch, Path: "calls", Message: err.Error()}}
				break
			}
			cm.Envelope, cm.Calls = env, m.Calls
		}
		if cm.Envelope == nil {
			// The conventional payload of a moment on the local API: what the gate recorded.
			cm.Payload = fmt.Sprintf("Agent %s asked for a decision on %s on %s (session %s).", m.Agent, orUnknown(m.Tool), orUnknown(m.Server), m.Session)
		}
		out = append(out, cm)
	}
	return out, nil
}

// Resolve implements console.Backend. The gate's refusals (not a principal, expired, already
// resolved, invalid) wrap console.ErrRefused; an unreachable or failing gate leaves the
// outcome unknown.
func (b consoleBackend) Resolve(ctx context.Context, id string, resolution []byte) (console.Result, error) {
	r, err := b.c.Resolve(ctx, id, resolution)
	if err != nil {
		msg := err.Error()
		for _, code := range []string{"GATE_UNREACHABLE", "GATE_ERROR", standalone.CodeUnavailable} {
			if strings.HasPrefix(msg, code) {
				return console.Result{}, errors.New(msg)
			}
		}
		return console.Result{}, fmt.Errorf("%w: %s", console.ErrRefused, msg)
	}
	res := console.Result{Kind: envelope.Kind(r.Kind)}
	switch {
	case r.Kind == "option" && r.Pending:
		res.Message = fmt.Sprintf("%s: your choice of option %s is recorded; %d of %d principals have chosen it", r.MomentID, r.Option, r.Votes, r.Required)
	case r.Kind == "option" && r.AuthorityID != "":
		res.Message = fmt.Sprintf("%s resolved by %s: option %s; authority %s issued for exactly that call", r.MomentID, b.c.Principal, r.Option, r.AuthorityID)
	default:
		res.Message = fmt.Sprintf("%s resolved by %s: %s", r.MomentID, b.c.Principal, r.Kind)
	}
	return res, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown call"
	}
	return s
}

func newConsoleCmd(s streams) *cobra.Command {
	var (
		f       apiFlags
		address string
		open    bool
	)
	cmd := &cobra.Command{
		Use:   "console [--as PRINCIPAL] [--address 127.0.0.1:0] [--open]",
		Short: "Serve the binding-moment web console for a principal, on loopback",
		Long: `Serve the web console for the binding moments a running 'actgate serve' holds for one
principal, on a loopback address only, and print its URL.

The console reads the principal's token file (DATA_DIR/principals/PRINCIPAL.token) and speaks the
gate's moments API with it, as 'actgate moments' and 'actgate resolve' do: the browser never sees
the token, and whoever can read the token file is that principal. Each pending moment is shown
with every envelope-04 §9.1 invariant (the four briefing slots, the recommended option marked,
the reasoning and action digest of each option, the open hatches and Decline) and the call it
decides; each button writes one of the four resolutions of §7.3. A malformed envelope is shown
as a diagnostic, never as a decision (§9.3).

The page accepts resolutions only from itself (a per-process token in the page and a
same-origin check) and answers only on its loopback address. Stop it with Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			// Fail now, not in the browser, if the gate is down or refuses the token.
			if _, err := c.Moments(cmd.Context(), false); err != nil {
				return err
			}
			ln, err := console.Listen(address)
			if err != nil {
				return usageError("--address: %v", err)
			}
			con, err := console.New(console.Options{
				Backend: consoleBackend{c}, Principal: c.Principal, Surface: "actgate serve at " + c.Server,
				Log: newLogger(s.err, false).WithName("console"),
			})
			if err != nil {
				_ = ln.Close()
				return fail(exitRejected, "CONSOLE_FAILED "+err.Error())
			}
			url := con.URL(ln)
			fmt.Fprintf(s.out, "actgate console for %s: %s\n", c.Principal, url)
			if open {
				if err := console.OpenBrowser(url); err != nil {
					fmt.Fprintf(s.err, "could not open a browser (%v); open %s yourself\n", err, url)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := console.Serve(ctx, ln, con); err != nil {
				return fail(exitRejected, "CONSOLE_FAILED "+err.Error())
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&address, "address", console.DefaultAddress, "the loopback address to serve on (a non-loopback address is refused)")
	cmd.Flags().BoolVar(&open, "open", false, "open the console in the desktop's browser")
	return cmd
}

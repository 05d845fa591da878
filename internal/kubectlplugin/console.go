package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/console"
	"github.com/actgate/actgate/internal/envelope"
)

// ConsoleBackend is the web console's console.Backend over BindingMoment objects, read and
// written with the user's own kubeconfig: a resolution is the same resourceVersion-guarded
// merge patch `kubectl actgate resolve` writes, so RBAC and the BindingMoment admission
// webhook judge it as that user, and their refusal is shown in the page (envelope-04 §12.4:
// the principal resolves on a surface bound to their own credential).
type ConsoleBackend struct {
	// Client reads and writes as the kubeconfig user.
	Client *Client
	// Namespace is where the moments are.
	Namespace string
	// Principal is the user the API server authenticates (WhoAmI). Only moments addressed
	// to them are listed, unless Everyone.
	Principal string
	// Everyone lists every pending moment the user can read, whoever its principal; the
	// webhook still refuses a resolution by anyone but the principal.
	Everyone bool
	// Now is the clock (pending or expired).
	Now func() time.Time
	// Via, when set, is written with each resolution as spec.resolution.via: the surface and
	// the OpenID Connect authentication the resolution was made with (admission checks the
	// authentication against the request's own, docs/security.md "The approval service").
	Via *v1alpha1.ResolutionVia
}

var _ console.Backend = (*ConsoleBackend)(nil)

// List implements console.Backend: the pending moments of the namespace addressed to the
// principal, each with its Act (tool, server, class, action digest). Acts that cannot be read
// leave the act's facts unavailable, with the API server's reason.
func (b *ConsoleBackend) List(ctx context.Context) ([]console.Moment, error) {
	all, err := b.Client.ListMoments(ctx, b.Namespace)
	if err != nil {
		return nil, &apiError{msg: apiMessage(err), err: err}
	}
	now := b.Now()
	var items []*v1alpha1.BindingMoment
	for i := range all {
		bm := &all[i]
		if StatusAt(bm, now) == StatusPending && (b.Everyone || bm.Spec.Principal == b.Principal) {
			items = append(items, bm)
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	acts := map[string]*v1alpha1.Act{}
	list, actsErr := b.Client.ListActs(ctx, b.Namespace)
	for i := range list {
		acts[list[i].Name] = &list[i]
	}
	out := make([]console.Moment, 0, len(items))
	for _, bm := range items {
		m := OpenMoment(bm)
		cm := console.Moment{
			ID: bm.Name, Ref: bm.Namespace + "/" + bm.Name, Principal: bm.Spec.Principal, Expires: bm.Spec.ExpiresAt.Time,
			Envelope: m.Envelope, Problems: m.Problems, Calls: m.Calls,
			Act: console.Act{Name: bm.Spec.ActRef.Name},
		}
		switch a := acts[bm.Spec.ActRef.Name]; {
		case a != nil:
			cm.Agent = a.Spec.Agent
			cm.Act.Tool, cm.Act.Server = a.Spec.Tool, a.Spec.Server
			cm.Act.Class, cm.Act.ActionDigest = string(a.Spec.ConsequenceClass), string(a.Spec.ActionDigest)
		case actsErr != nil:
			cm.Act.Unavailable = apiMessage(actsErr)
		default:
			cm.Act.Unavailable = "no such Act in namespace " + bm.Namespace
		}
		if !m.Well() {
			// The conventional payload of a BindingMoment: the synopsis the object states
			// outside its envelope (envelope-04 §9.3).
			cm.Payload = bm.Spec.Synopsis
		}
		out = append(out, cm)
	}
	return out, nil
}

// Resolve implements console.Backend: it reads the moment again, checks it can still be
// resolved with this envelope (Resolvable, SpecResolution: envelope-04 §7.3) and writes the
// resolution as the user. The plugin's and the API server's refusals (admission, RBAC, a
// conflicting write) wrap console.ErrRefused with their message.
func (b *ConsoleBackend) Resolve(ctx context.Context, id string, resolution []byte) (console.Result, error) {
	bm, err := b.Client.GetMoment(ctx, b.Namespace, id)
	if err != nil {
		return console.Result{}, err
	}
	m := OpenMoment(bm)
	if err := Resolvable(m, "", b.Now()); err != nil {
		return console.Result{}, fmt.Errorf("%w: %w", console.ErrRefused, err)
	}
	parsed, err := envelope.ParseResolution(resolution)
	if err != nil {
		return console.Result{}, fmt.Errorf("%w: %w: %s", console.ErrRefused, ErrInvalidResolution, problemsLine(envelope.ProblemsOf(err)))
	}
	res, err := SpecResolution(m.Envelope, *parsed)
	if err != nil {
		return console.Result{}, fmt.Errorf("%w: %w", console.ErrRefused, err)
	}
	// The surface only, unless the caller knows how the API server authenticated the user
	// (the approval service): docs/security.md "Resolution audit".
	res.Via = &v1alpha1.ResolutionVia{Surface: v1alpha1.SurfaceConsole}
	if b.Via != nil {
		res.Via = b.Via.DeepCopy()
	}
	if _, err := b.Client.Resolve(ctx, bm, res); err != nil {
		if errors.Is(err, ErrRefusedByServer) || errors.Is(err, ErrConflict) {
			return console.Result{}, fmt.Errorf("%w: %w", console.ErrRefused, err)
		}
		return console.Result{}, err
	}
	return console.Result{Kind: parsed.Kind,
		Message: fmt.Sprintf("bindingmoment.actgate.io/%s resolved by %s: %s", bm.Name, b.Principal, Describe(m.Envelope, res))}, nil
}

// apiError is an API server error shown in the server's own words that still unwraps to the
// API status, so a caller can tell a refusal (apierrors.IsForbidden) from an outage.
type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

func (p *plugin) consoleCmd() *cobra.Command {
	var (
		address  string
		open     bool
		everyone bool
	)
	cmd := &cobra.Command{
		Use:   "console [--address 127.0.0.1:0] [-n NAMESPACE] [--open]",
		Short: "Serve the binding-moment web console, on loopback, as the current kubeconfig user",
		Long: `Console serves a web page on a loopback address (only) and prints its URL. The page lists the
binding moments of the namespace that are pending for the user the API server authenticates you
as, each with every invariant of envelope-04 §9.1 — the four briefing slots, the options with
their reasoning and the recommended one marked, an affordance for each open hatch and Decline —
and the act it decides (tool, server, consequence class, action digest). Each button writes one
of the four resolutions of §7.3 with your kubeconfig, exactly as kubectl actgate resolve does, so
RBAC and the admission webhook judge it as you and their refusal is shown on the page. A
malformed envelope is shown as a diagnostic, never as a decision (§9.3).

The page accepts resolutions only from itself (a per-process token and a same-origin check) and
answers only on its loopback address. Stop it with Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := p.client()
			if err != nil {
				return err
			}
			ns, err := p.namespace()
			if err != nil {
				return err
			}
			me, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return exitWith(ExitError, err)
			}
			ln, err := console.Listen(address)
			if err != nil {
				return usagef("--address: %v", err)
			}
			surface := "namespace " + ns
			if cfg, err := p.flags.ToRESTConfig(); err == nil {
				if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
					surface += " on " + u.Host
				}
			}
			con, err := console.New(console.Options{
				Backend:   &ConsoleBackend{Client: c, Namespace: ns, Principal: me, Everyone: everyone, Now: p.Now},
				Principal: me, Surface: surface, Now: p.Now,
				Log: logr.FromSlogHandler(slog.NewTextHandler(p.Streams.ErrOut, nil)).WithName("console"),
			})
			if err != nil {
				_ = ln.Close()
				return exitWith(ExitError, err)
			}
			u := con.URL(ln)
			fmt.Fprintf(p.Streams.Out, "kubectl actgate console for %s (%s): %s\n", safe(me), safe(surface), u)
			if open {
				if err := console.OpenBrowser(u); err != nil {
					fmt.Fprintf(p.Streams.ErrOut, "Warning: could not open a browser (%v); open %s yourself\n", err, u)
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return exitOnError(console.Serve(ctx, ln, con))
		},
	}
	cmd.Flags().StringVar(&address, "address", console.DefaultAddress, "the loopback address to serve on (a non-loopback address is refused)")
	cmd.Flags().BoolVar(&open, "open", false, "open the console in the desktop's browser")
	cmd.Flags().BoolVar(&everyone, "all", false, "list every pending binding moment you can read, whoever its principal (admission still lets only the principal resolve)")
	return cmd
}

package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/envelope"
)

// Exit statuses of kubectl-actgate; part of its public interface.
const (
	// ExitOK: done (for resolve: the resolution is stored exactly as chosen).
	ExitOK = 0
	// ExitError: the command could not do its job (API server unreachable, object not found,
	// the outcome of a write unknown, …).
	ExitError = 1
	// ExitUsage: unknown command or flag, wrong arguments, no terminal for the picker.
	ExitUsage = 2
	// ExitRefused: resolve wrote nothing because it was refused: by the plugin (malformed
	// envelope, already resolved, expired, another envelope than pinned, not a valid
	// resolution) or by the API server (admission denial, RBAC, schema, a conflicting write).
	ExitRefused = 3
	// ExitAborted: the principal left the picker without resolving; nothing was written.
	ExitAborted = 4
)

// Options are what the plugin needs from its process.
type Options struct {
	// Streams are stdin, stdout and stderr. The picker runs only when In is a terminal.
	Streams genericiooptions.IOStreams
	// Now is the clock (expiry, ages).
	Now func() time.Time
}

// exitError ends a command with a status; err's message is printed after "error: ".
type exitError struct {
	status int
	err    error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitWith(status int, err error) error { return &exitError{status: status, err: err} }

func usagef(format string, args ...any) error {
	return exitWith(ExitUsage, fmt.Errorf(format, args...))
}

// Main runs the plugin with args (without the program name) and returns the exit status. Every
// error is printed on stderr as one "error: " line (kubectl's form).
func Main(args []string, o Options) int {
	root := NewCommand(o)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(o.Streams.ErrOut, "error: %s\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.status
	}
	// Not from a RunE: cobra refused the flags or the arguments.
	fmt.Fprintf(o.Streams.ErrOut, "See '%s --help' for usage.\n", root.DisplayName())
	return ExitUsage
}

// plugin is the state the subcommands share: the connection flags and the options.
type plugin struct {
	Options
	flags *genericclioptions.ConfigFlags
}

// NewCommand builds `kubectl actgate` and its subcommands.
func NewCommand(o Options) *cobra.Command {
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &plugin{Options: o, flags: genericclioptions.NewConfigFlags(true)}
	p.flags.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.UserAgent = FieldManager
		c.WarningHandler = rest.NewWarningWriter(o.Streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
		return c
	}
	root := &cobra.Command{
		Use:   "kubectl-actgate",
		Short: "The actgate act ledger and binding moments, for the people who resolve them",
		Long: `kubectl actgate shows the ledger of agent tool calls (Acts) and lets a principal resolve the
binding moments addressed to them (envelope-04 §7.3), as the current kubeconfig user.

Exit status: 0 done; 1 error; 2 usage; 3 resolution refused, nothing written (by the plugin,
by admission, RBAC or a conflicting write); 4 left the picker, nothing written.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl actgate"},
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	p.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(p.actsCmd(), p.momentsCmd(), p.showCmd(), p.resolveCmd(), p.pickCmd(), p.consoleCmd(), p.doctorCmd(), p.toolsCmd())
	return root
}

func (p *plugin) client() (*Client, error) {
	cfg, err := p.flags.ToRESTConfig()
	if err != nil {
		return nil, exitWith(ExitError, fmt.Errorf("kubeconfig: %w", err))
	}
	c, err := NewClient(cfg)
	if err != nil {
		return nil, exitWith(ExitError, err)
	}
	return c, nil
}

// namespace is -n, or the kubeconfig context's namespace, or "default".
func (p *plugin) namespace() (string, error) {
	ns, _, err := p.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", exitWith(ExitError, fmt.Errorf("kubeconfig: %w", err))
	}
	return ns, nil
}

// listScope is the namespace to list in: "" for -A.
func (p *plugin) listScope(all bool) (string, error) {
	if all {
		return "", nil
	}
	return p.namespace()
}

func where(ns string) string {
	if ns == "" {
		return "in any namespace"
	}
	return "in namespace " + ns
}

func checkOutput(output string) error {
	if output == OutputTable {
		return nil
	}
	for _, o := range Outputs() {
		if output == o {
			return nil
		}
	}
	return usagef("unknown output format %q: use one of %s", output, strings.Join(Outputs(), ", "))
}

func (p *plugin) actsCmd() *cobra.Command {
	var allNamespaces bool
	var output string
	cmd := &cobra.Command{
		Use:   "acts",
		Short: "List the act ledger: tool, server, class, decision, state, code, action digest, age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := p.client()
			if err != nil {
				return err
			}
			ns, err := p.listScope(allNamespaces)
			if err != nil {
				return err
			}
			acts, err := c.ListActs(cmd.Context(), ns)
			if err != nil {
				return exitWith(ExitError, err)
			}
			if len(acts) == 0 && (output == OutputTable || output == OutputWide) {
				fmt.Fprintf(p.Streams.ErrOut, "No acts found %s.\n", where(ns))
				return nil
			}
			t := ActsTable(acts, output == OutputWide, p.Now())
			return exitOnError(PrintList(p.Streams.Out, output, allNamespaces, t, actList(acts), "act.actgate.io"))
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list acts in every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or name")
	return cmd
}

func (p *plugin) momentsCmd() *cobra.Command {
	var allNamespaces, everyone bool
	var output string
	cmd := &cobra.Command{
		Use:   "moments",
		Short: "List the pending binding moments addressed to me (--all: every pending one I can see)",
		Long: `List the pending binding moments whose principal is the user the API server authenticates
you as (a SelfSubjectReview, like kubectl auth whoami): not resolved and not expired. --all
lists every pending binding moment you can read, with its principal.

The synopsis is the envelope's own; an envelope that is malformed, or is not the one the object
names, shows "<envelope discarded: CODE>" and cannot be resolved.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := p.client()
			if err != nil {
				return err
			}
			ns, err := p.listScope(allNamespaces)
			if err != nil {
				return err
			}
			me := ""
			if !everyone {
				if me, err = c.WhoAmI(cmd.Context()); err != nil {
					return exitWith(ExitError, err)
				}
			}
			rows, items, err := p.pending(cmd.Context(), c, ns, me)
			if err != nil {
				return err
			}
			if len(rows) == 0 && (output == OutputTable || output == OutputWide) {
				if everyone {
					fmt.Fprintf(p.Streams.ErrOut, "No pending binding moments %s.\n", where(ns))
				} else {
					fmt.Fprintf(p.Streams.ErrOut, "No pending binding moments for %s %s.\n", safe(me), where(ns))
				}
				return nil
			}
			t := MomentsTable(rows, everyone, output == OutputWide, p.Now())
			return exitOnError(PrintList(p.Streams.Out, output, allNamespaces, t, momentList(items), "bindingmoment.actgate.io"))
		},
	}
	cmd.Flags().BoolVar(&everyone, "all", false, "every pending binding moment you can read, whoever its principal")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "look in every namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json, yaml or name")
	return cmd
}

// pending lists the moments of ns that are pending now and, when principal is not "", addressed
// to principal, with their acts. Acts that cannot be listed (a principal may read binding
// moments without reading acts) leave those columns unknown, with one warning.
func (p *plugin) pending(ctx context.Context, c *Client, ns, principal string) ([]MomentRow, []v1alpha1.BindingMoment, error) {
	all, err := c.ListMoments(ctx, ns)
	if err != nil {
		return nil, nil, exitWith(ExitError, err)
	}
	now := p.Now()
	var items []v1alpha1.BindingMoment
	for i := range all {
		bm := &all[i]
		if StatusAt(bm, now) == StatusPending && (principal == "" || bm.Spec.Principal == principal) {
			items = append(items, *bm)
		}
	}
	if len(items) == 0 {
		return nil, nil, nil
	}
	acts := map[string]*v1alpha1.Act{}
	if list, err := c.ListActs(ctx, ns); err != nil {
		fmt.Fprintf(p.Streams.ErrOut, "Warning: acts cannot be read, so their columns show %s: %s\n", unknown, apiMessage(err))
	} else {
		for i := range list {
			acts[list[i].Namespace+"/"+list[i].Name] = &list[i]
		}
	}
	rows := make([]MomentRow, len(items))
	for i := range items {
		bm := &items[i]
		rows[i] = MomentRow{Moment: OpenMoment(bm), Act: acts[bm.Namespace+"/"+bm.Spec.ActRef.Name]}
	}
	return rows, items, nil
}

// load reads a binding moment and, best effort, its act.
func (p *plugin) load(ctx context.Context, c *Client, name string) (ShowInput, error) {
	ns, err := p.namespace()
	if err != nil {
		return ShowInput{}, err
	}
	bm, err := c.GetMoment(ctx, ns, name)
	if err != nil {
		return ShowInput{}, exitWith(ExitError, err)
	}
	in := ShowInput{Moment: OpenMoment(bm), Now: p.Now()}
	in.Act, in.ActErr = c.GetAct(ctx, ns, bm.Spec.ActRef.Name)
	if in.ActErr != nil {
		in.ActErr = errors.New(apiMessage(in.ActErr))
	}
	return in, nil
}

func (p *plugin) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Show a binding moment: its envelope, the act it decides, and how to resolve it",
		Long: `Show renders the binding moment's envelope with every invariant of envelope-04 §9.1: the four
briefing slots, the options with their reasoning and the recommended one marked, an affordance
for each open hatch and one to decline, with the command behind each. Above it: the principal,
the state, the envelope digest and the act (tool, server, consequence class, action digest).
A malformed envelope, or one that is not the envelope the object names, is discarded: no
decision is shown, only a diagnostic (§9.3, §12.8).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := p.client()
			if err != nil {
				return err
			}
			in, err := p.load(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			return exitOnError(Show(p.Streams.Out, in))
		},
	}
}

// resolveFlags are the non-interactive ways to resolve, one of the four of envelope-04 §7.3.
type resolveFlags struct {
	option   int
	answer   string
	question bool
	decline  bool
	pin      string
}

func (p *plugin) resolveCmd() *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "resolve NAME [--option N | --answer TEXT | --question | --decline]",
		Short: "Resolve a binding moment addressed to you (no flag, in a terminal: the picker)",
		Long: `Resolve writes the binding moment's spec.resolution as the current kubeconfig user, naming the
envelope digest (envelope-04 §7.3). Exactly one of:

  --option N      select option [N] as numbered by show (1-based; stored as optionIdx N-1)
  --answer TEXT   the answer-space hatch: a free-form answer instead of an option ("-" reads stdin)
  --question      the question-space hatch: reject the question as put, reopen the discussion
  --decline       answer no to the question as put

With none of them and a terminal on stdin, the arrow-key picker opens. Only the principal may
resolve; the admission webhook refuses anyone else and its message is shown. The write is a
merge patch guarded by the resourceVersion read: if the moment changed meanwhile (someone
resolved it), nothing is overwritten. --envelope-digest refuses to write unless the moment still
names that envelope.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := 0
			for _, changed := range []bool{cmd.Flags().Changed("option"), cmd.Flags().Changed("answer"), f.question, f.decline} {
				if changed {
					set++
				}
			}
			if set > 1 {
				return usagef("give only one of --option, --answer, --question, --decline")
			}
			var choice *envelope.Resolution
			switch {
			case cmd.Flags().Changed("option"):
				if f.option < 1 {
					return usagef("--option is numbered from 1, as show numbers the options")
				}
				choice = &envelope.Resolution{Kind: envelope.KindOption, OptionIdx: f.option - 1}
			case cmd.Flags().Changed("answer"):
				text, err := p.answerText(f.answer)
				if err != nil {
					return err
				}
				choice = &envelope.Resolution{Kind: envelope.KindAnswer, Answer: text}
			case f.question:
				choice = &envelope.Resolution{Kind: envelope.KindQuestion}
			case f.decline:
				choice = &envelope.Resolution{Kind: envelope.KindDeclined}
			}
			if choice == nil {
				if _, ok := terminalOf(p.Streams.In); !ok {
					return usagef("no resolution given: pass --option N, --answer TEXT, --question or --decline, or run in a terminal for the picker")
				}
			}
			c, err := p.client()
			if err != nil {
				return err
			}
			return p.resolve(cmd.Context(), c, args[0], f.pin, choice)
		},
	}
	cmd.Flags().IntVar(&f.option, "option", 0, "select option N (1-based, as show numbers them)")
	cmd.Flags().StringVar(&f.answer, "answer", "", `answer in your own words (the answer-space hatch); "-" reads the answer from stdin`)
	cmd.Flags().BoolVar(&f.question, "question", false, "reject the question as put and reopen the discussion (the question-space hatch)")
	cmd.Flags().BoolVar(&f.decline, "decline", false, "answer no to the question as put")
	cmd.Flags().StringVar(&f.pin, "envelope-digest", "", "write only if the binding moment still names the envelope with this digest")
	return cmd
}

func (p *plugin) pickCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pick [NAME]",
		Short: "Resolve a binding moment with the arrow-key picker (no NAME: your only pending one)",
		Long: `Pick opens the arrow-key picker of envelope-04 §9.2 on a binding moment: ↑/↓ (or 1-4) move
among the options, the recommended one marked; Enter chooses; a answers in your own words, q
rejects the question, d declines (each only when the envelope leaves that hatch open, decline
always); every choice is confirmed with y before it is written; Esc leaves without writing.
Without NAME it opens your pending binding moment in the namespace, if there is exactly one.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, ok := terminalOf(p.Streams.In); !ok {
				return usagef("the picker needs a terminal on stdin; use kubectl actgate resolve NAME --option N | --answer TEXT | --question | --decline")
			}
			c, err := p.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return p.resolve(cmd.Context(), c, args[0], "", nil)
			}
			ns, err := p.namespace()
			if err != nil {
				return err
			}
			me, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return exitWith(ExitError, err)
			}
			_, items, err := p.pending(cmd.Context(), c, ns, me)
			if err != nil {
				return err
			}
			switch len(items) {
			case 0:
				fmt.Fprintf(p.Streams.ErrOut, "No pending binding moments for %s %s.\n", safe(me), where(ns))
				return nil
			case 1:
				return p.resolve(cmd.Context(), c, items[0].Name, "", nil)
			}
			names := make([]string, len(items))
			for i := range items {
				names[i] = items[i].Name
			}
			return usagef("%d binding moments are pending for %s %s (%s): name one, or see kubectl actgate moments",
				len(items), safe(me), where(ns), strings.Join(names, ", "))
		},
	}
}

// answerText is --answer's value, or stdin for "-" (one trailing newline dropped).
func (p *plugin) answerText(v string) (string, error) {
	if v != "-" {
		return v, nil
	}
	b, err := io.ReadAll(io.LimitReader(p.Streams.In, envelope.MaxResolutionBytes+1))
	if err != nil {
		return "", exitWith(ExitError, fmt.Errorf("read the answer from stdin: %w", err))
	}
	if len(b) > envelope.MaxResolutionBytes {
		return "", usagef("the answer on stdin is longer than %d bytes", envelope.MaxResolutionBytes)
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}

// resolve loads the moment, checks it can be resolved, gets the choice (given, or from the
// picker when choice is nil), checks it against the envelope and writes it.
func (p *plugin) resolve(ctx context.Context, c *Client, name, pin string, choice *envelope.Resolution) error {
	in, err := p.load(ctx, c, name)
	if err != nil {
		return err
	}
	m := in.Moment
	if err := Resolvable(m, pin, p.Now()); err != nil {
		return exitWith(ExitRefused, err)
	}
	if choice == nil {
		tty, _ := terminalOf(p.Streams.In)
		choice, err = runPicker(tty, p.Streams.Out, newPicker(m.Envelope, pickerLines(in)...).withCalls(m.Calls))
		if err != nil {
			return exitWith(ExitError, err)
		}
		if choice == nil {
			return exitWith(ExitAborted, errors.New("left the picker: nothing was written"))
		}
		// The principal may have taken longer than the moment had left.
		if err := Resolvable(m, pin, p.Now()); err != nil {
			return exitWith(ExitRefused, err)
		}
	}
	if err := CheckChoice(m, *choice); err != nil {
		return exitWith(ExitRefused, err)
	}
	choice.EnvelopeDigest = m.Envelope.Digest()
	res, err := SpecResolution(m.Envelope, *choice)
	if err != nil {
		return exitWith(ExitRefused, err)
	}
	// The surface only: the plugin does not know how the API server authenticated the user
	// (docs/security.md "Resolution audit").
	res.Via = &v1alpha1.ResolutionVia{Surface: v1alpha1.SurfaceKubectl}
	if _, err := c.Resolve(ctx, m.Object, res); err != nil {
		switch {
		case errors.Is(err, ErrRefusedByServer):
			return exitWith(ExitRefused, fmt.Errorf("%w%s", err, p.principalHint(ctx, c, m.Object)))
		case errors.Is(err, ErrConflict):
			return exitWith(ExitRefused, fmt.Errorf("%w; see kubectl actgate show %s -n %s", err, m.Object.Name, m.Object.Namespace))
		}
		return exitWith(ExitError, fmt.Errorf("%w; whether it was written is unknown: check with kubectl actgate show %s -n %s", err, m.Object.Name, m.Object.Namespace))
	}
	fmt.Fprintf(p.Streams.Out, "bindingmoment.actgate.io/%s resolved: %s\n  envelope %s\n", m.Object.Name, Describe(m.Envelope, res), res.EnvelopeDigest)
	return nil
}

// pickerLines is the picker's header, with the warning of a moment whose calls are not shown.
func pickerLines(in ShowInput) []string {
	h := pickerHeader(in)
	if !in.Moment.CallsShown() {
		h = append(h, "CALLS NOT SHOWN: this moment does not carry the calls its options run; no option can be chosen (decline, answer or question it).")
	}
	return h
}

// principalHint explains a refusal when the caller is not the principal: admission admits a
// resolution only from the user the moment names (docs/architecture.md "Principals").
func (p *plugin) principalHint(ctx context.Context, c *Client, bm *v1alpha1.BindingMoment) string {
	me, err := c.WhoAmI(ctx)
	if err != nil || me == bm.Spec.Principal {
		return ""
	}
	return fmt.Sprintf("\nthis binding moment is addressed to %s; the API server authenticates you as %s, and only the principal may resolve it",
		safe(bm.Spec.Principal), safe(me))
}

// pickerHeader is what the picker shows above the envelope: which moment, for whom, and the
// act it decides.
func pickerHeader(in ShowInput) []string {
	bm := in.Moment.Object
	lines := []string{fmt.Sprintf("Binding moment %s/%s for %s, expires %s",
		safe(bm.Namespace), safe(bm.Name), safe(bm.Spec.Principal), expiresIn(bm.Spec.ExpiresAt, in.Now))}
	if a := in.Act; a != nil {
		lines = append(lines,
			fmt.Sprintf("Act %s: %s on %s (%s)", safe(a.Name), safe(a.Spec.Tool), safe(a.Spec.Server), safe(string(a.Spec.ConsequenceClass))),
			fmt.Sprintf("  action %s", safe(string(a.Spec.ActionDigest))))
	} else {
		lines = append(lines, fmt.Sprintf("Act %s (cannot be read)", safe(bm.Spec.ActRef.Name)))
	}
	return append(lines, "")
}

func exitOnError(err error) error {
	if err != nil {
		return exitWith(ExitError, err)
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/actgate/actgate/test/envtest"
)

// Exit codes.
const (
	exitPass  = 0 // every run completed and every check passed
	exitFail  = 1 // a check failed or a run could not complete
	exitUsage = 2 // bad flags
)

// options are the command line.
type options struct {
	targets        []string
	concurrency    []int
	duration       time.Duration
	directDuration time.Duration
	mix            Mix
	out            string
	listen         string
	actgate        string
	seed           uint64
	floor          bool
	log            io.Writer // progress lines; the report goes to stdout
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "both", "standalone, sidecar or both")
	conc := fs.String("concurrency", "1,16,64", "comma-separated worker counts; one run per count and target")
	duration := fs.Duration("duration", 10*time.Second, "length of each run's mix through the sink")
	direct := fs.Duration("direct-duration", -1, "length of each run's direct phase (default: half of -duration; 0 skips it)")
	mix := fs.String("mix", DefaultMix, "weights of hot, permit, escalate, replay and substitute operations")
	out := fs.String("out", "", "write the report as JSON to this file too")
	listen := fs.String("listen", "127.0.0.1", "loopback IP every listener binds (nothing else is accepted)")
	bin := fs.String("actgate", "", "the actgate binary (default: go build ./cmd/actgate into a temporary folder)")
	floor := fs.Bool("floor", true, "after each sidecar run, run the API floor: the same mix's fewest API writes made straight to the same API server, no sink")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the workers' choices")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := options{duration: *duration, out: *out, listen: *listen, actgate: *bin, seed: *seed, floor: *floor}
	switch *target {
	case "both":
		o.targets = []string{targetStandalone, targetSidecar}
	case targetStandalone, targetSidecar:
		o.targets = []string{*target}
	default:
		return o, fmt.Errorf("-target %q: want standalone, sidecar or both", *target)
	}
	for _, s := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1024 {
			return o, fmt.Errorf("-concurrency %q: want integers 1..1024", *conc)
		}
		o.concurrency = append(o.concurrency, n)
	}
	if o.duration <= 0 || o.duration > time.Hour {
		return o, fmt.Errorf("-duration %s: want more than 0 and at most 1h", o.duration)
	}
	o.directDuration = *direct
	if o.directDuration < 0 {
		o.directDuration = o.duration / 2
	}
	var err error
	if o.mix, err = ParseMix(*mix); err != nil {
		return o, fmt.Errorf("-mix: %w", err)
	}
	if err := loopbackHost(o.listen); err != nil {
		return o, err
	}
	return o, nil
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "USAGE", err)
		}
		return exitUsage
	}
	o.log = stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := runAll(ctx, o)
	writeText(stdout, rep)
	if o.out != "" {
		if werr := writeJSON(o.out, rep); werr != nil {
			fmt.Fprintln(stderr, "LOAD_FAILED", werr)
			return exitFail
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "LOAD_FAILED", err)
		return exitFail
	}
	if !rep.Pass {
		return exitFail
	}
	return exitPass
}

// runAll runs every target at every concurrency. A run that cannot complete is recorded as
// failed and the next one still runs.
func runAll(ctx context.Context, o options) (rep Report, err error) {
	t0 := time.Now()
	rep = Report{Machine: machine(), Pass: true}
	defer func() {
		rep.Machine.LoadAvgEnd = loadAvg()
		// Nothing measured and checked is never a pass.
		rep.Pass = rep.Pass && err == nil && len(rep.Runs) > 0
	}()
	root, err := envtest.RepoRoot()
	if err != nil {
		return rep, err
	}
	work, err := os.MkdirTemp("", "actgate-load-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(work)
	bin := o.actgate
	if bin == "" {
		fmt.Fprintln(o.log, "building cmd/actgate …")
		if bin, err = buildActgate(ctx, root, work); err != nil {
			return rep, err
		}
	}
	// Every target is up before the first run, and the runs interleave by concurrency
	// (standalone 1, sidecar 1, standalone 16, …): both targets' runs at one concurrency see
	// the machine at nearly the same load, and the comparison (Report.Compare) is of those.
	var targets []target
	defer func() {
		for _, t := range targets {
			if cerr := t.close(); cerr != nil {
				rep.Pass = false
				fmt.Fprintf(o.log, "stopping %s: %v\n", t.name(), cerr)
			}
		}
	}()
	for _, name := range o.targets {
		fmt.Fprintf(o.log, "%s starting target %s …\n", since(t0), name)
		t, err := newTarget(ctx, name, o, bin, filepath.Join(work, name))
		if err != nil {
			rep.Pass = false
			rep.Runs = append(rep.Runs, RunReport{Target: name, Error: err.Error()})
			continue
		}
		targets = append(targets, t)
	}
	for i, n := range o.concurrency {
		for _, t := range targets {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(o.log, "%s run %s concurrency %d for %s (direct %s) …\n", since(t0), t.name(), n, o.duration, o.directDuration)
			rc := runConfig{concurrency: n, duration: o.duration, directDuration: o.directDuration, mix: o.mix, host: o.listen, seed: o.seed + uint64(i)*1000, floor: o.floor}
			run, err := runOnce(ctx, t, rc, fmt.Sprintf("run-%d", i))
			if err != nil {
				run.Error = err.Error()
				run.Pass = false
			}
			rep.Pass = rep.Pass && run.Pass
			rep.Runs = append(rep.Runs, run)
		}
	}
	rep.Compare = compare(rep.Runs)
	fmt.Fprintf(o.log, "%s done\n", since(t0))
	if ctx.Err() != nil {
		rep.Pass = false
		return rep, ctx.Err()
	}
	return rep, nil
}

// since is the time since t0 for progress lines.
func since(t0 time.Time) string {
	return "[" + time.Since(t0).Round(100*time.Millisecond).String() + "]"
}

// The targets' names (-target, RunReport.Target).
const (
	targetStandalone = "standalone"
	targetSidecar    = "sidecar"
)

func newTarget(ctx context.Context, name string, o options, bin, dir string) (target, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	switch name {
	case targetStandalone:
		return &standalone{bin: bin, host: o.listen, dir: dir}, nil
	case targetSidecar:
		return startSidecarTarget(ctx, bin, o.listen, dir, o.log)
	}
	return nil, fmt.Errorf("unknown target %q", name)
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Latency is one series' percentiles in milliseconds (nearest rank).
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

// Overhead is the sink's latency minus the direct call's at each percentile, for a series
// through the sink and the tool it reaches.
type Overhead struct {
	Series string  `json:"series"`
	Tool   string  `json:"tool"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
}

// RunReport is one target at one concurrency.
type RunReport struct {
	Target         string             `json:"target"`
	Concurrency    int                `json:"concurrency"`
	Mix            string             `json:"mix"`
	Duration       float64            `json:"duration_s"`
	Elapsed        float64            `json:"elapsed_s"`
	Calls          int                `json:"calls"`
	Throughput     float64            `json:"calls_per_s"`
	SinkCPU        float64            `json:"sink_cpu_us_per_call"` // the sink process's CPU (user and system) during the mix per call; 0: /proc unreadable
	Ops            map[string]int     `json:"ops"`
	Gate           map[string]Latency `json:"gate"`
	DirectDuration float64            `json:"direct_elapsed_s"`
	DirectCalls    int                `json:"direct_calls"`
	Direct         map[string]Latency `json:"direct"`
	Overhead       []Overhead         `json:"overhead"`
	Unexpected     map[string]int     `json:"unexpected,omitempty"`
	Checks         []Check            `json:"checks"`
	Floor          *FloorReport       `json:"api_floor,omitempty"`
	Pass           bool               `json:"pass"`
	Error          string             `json:"error,omitempty"`
}

// Machine records what the numbers were measured on.
type Machine struct {
	GoVersion    string     `json:"go_version"`
	OS           string     `json:"os"`
	Arch         string     `json:"arch"`
	NumCPU       int        `json:"num_cpu"`
	GOMAXPROCS   int        `json:"gomaxprocs"`
	LoadAvgStart [3]float64 `json:"loadavg_start"`
	LoadAvgEnd   [3]float64 `json:"loadavg_end"`
	Started      time.Time  `json:"started"`
}

// Report is the whole output.
type Report struct {
	Machine Machine      `json:"machine"`
	Runs    []RunReport  `json:"runs"`
	Compare []Comparison `json:"sidecar_vs_standalone,omitempty"`
	Pass    bool         `json:"pass"`
}

// Comparison is the sidecar's run against the standalone gate's at one concurrency, from runs
// made one after the other (runAll interleaves them): throughput and sink CPU per call as
// sidecar / standalone, and the hot path's overhead p50 of each (ms).
type Comparison struct {
	Concurrency   int      `json:"concurrency"`
	Throughput    float64  `json:"calls_per_s_ratio"`
	CPUPerCall    float64  `json:"sink_cpu_per_call_ratio,omitempty"`
	HotOverheadSA *float64 `json:"hot_overhead_p50_ms_standalone,omitempty"`
	HotOverheadSC *float64 `json:"hot_overhead_p50_ms_sidecar,omitempty"`
}

// compare pairs the runs of the two targets in the order they were made: the k-th standalone
// run of a concurrency with the k-th sidecar run of it (a concurrency listed twice is two
// pairs), where both completed.
func compare(runs []RunReport) []Comparison {
	type key struct{ concurrency, k int }
	var order []key
	standalones, sidecars := map[key]RunReport{}, map[key]RunReport{}
	nsa, nsc := map[int]int{}, map[int]int{}
	for _, r := range runs {
		switch r.Target {
		case targetStandalone:
			k := key{r.Concurrency, nsa[r.Concurrency]}
			nsa[r.Concurrency]++
			standalones[k] = r
			order = append(order, k)
		case targetSidecar:
			k := key{r.Concurrency, nsc[r.Concurrency]}
			nsc[r.Concurrency]++
			sidecars[k] = r
		}
	}
	var out []Comparison
	for _, k := range order {
		sa := standalones[k]
		sc, ok := sidecars[k]
		if !ok || sa.Error != "" || sc.Error != "" || sa.Throughput <= 0 {
			continue
		}
		c := Comparison{Concurrency: k.concurrency, Throughput: sc.Throughput / sa.Throughput}
		if sa.SinkCPU > 0 && sc.SinkCPU > 0 {
			c.CPUPerCall = sc.SinkCPU / sa.SinkCPU
		}
		c.HotOverheadSA, c.HotOverheadSC = hotOverhead(sa), hotOverhead(sc)
		out = append(out, c)
	}
	return out
}

// hotOverhead is the run's hot-path overhead p50 (ms), nil when it has none.
func hotOverhead(r RunReport) *float64 {
	for _, o := range r.Overhead {
		if o.Series == seriesHot {
			return &o.P50
		}
	}
	return nil
}

func machine() Machine {
	return Machine{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, NumCPU: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), LoadAvgStart: loadAvg(), Started: time.Now().UTC().Truncate(time.Second)}
}

// loadAvg reads /proc/loadavg (zeros where there is none).
func loadAvg() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func summarize(l latencies) map[string]Latency {
	out := map[string]Latency{}
	for s, ds := range l {
		sorted := slices.Clone(ds)
		slices.Sort(sorted)
		out[s] = Latency{N: len(sorted), P50: ms(percentile(sorted, 50)), P95: ms(percentile(sorted, 95)), P99: ms(percentile(sorted, 99))}
	}
	return out
}

func overheads(gate, direct map[string]Latency) []Overhead {
	var out []Overhead
	for _, pair := range overheadPairs {
		g, ok1 := gate[pair.series]
		d, ok2 := direct[pair.tool]
		if !ok1 || !ok2 || g.N == 0 || d.N == 0 {
			continue
		}
		out = append(out, Overhead{Series: pair.series, Tool: pair.tool, P50: g.P50 - d.P50, P95: g.P95 - d.P95, P99: g.P99 - d.P99})
	}
	return out
}

// writeText writes the plain report: the machine, then per run the throughput, a latency
// table (through the sink, direct, overhead) and the checks.
func writeText(w io.Writer, r Report) {
	m := r.Machine
	fmt.Fprintf(w, "actgate load report  %s  %s %s/%s  NumCPU=%d GOMAXPROCS=%d  loadavg start %.2f %.2f %.2f, end %.2f %.2f %.2f\n",
		m.Started.Format(time.RFC3339), m.GoVersion, m.OS, m.Arch, m.NumCPU, m.GOMAXPROCS,
		m.LoadAvgStart[0], m.LoadAvgStart[1], m.LoadAvgStart[2], m.LoadAvgEnd[0], m.LoadAvgEnd[1], m.LoadAvgEnd[2])
	fmt.Fprintln(w, "(the sink, its upstreams and the clients share the machine; numbers from a loaded machine are not benchmarks)")
	for _, run := range r.Runs {
		fmt.Fprintf(w, "\n== %s  concurrency %d  %.1fs  mix %s\n", run.Target, run.Concurrency, run.Elapsed, run.Mix)
		if run.Error != "" {
			fmt.Fprintf(w, "RUN FAILED: %s\n", run.Error)
			continue
		}
		var ops []string
		for _, k := range kinds {
			if n := run.Ops[string(k)]; n > 0 {
				ops = append(ops, fmt.Sprintf("%s %d", k, n))
			}
		}
		fmt.Fprintf(w, "throughput %.1f calls/s through the sink (%d calls; ops: %s); direct %d calls in %.1fs\n",
			run.Throughput, run.Calls, strings.Join(ops, ", "), run.DirectCalls, run.DirectDuration)
		if run.SinkCPU > 0 {
			fmt.Fprintf(w, "sink process CPU %.0f µs per call\n", run.SinkCPU)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "series\tn\tp50 ms\tp95 ms\tp99 ms\t")
		for _, s := range gateSeries {
			if l, ok := run.Gate[s]; ok {
				fmt.Fprintf(tw, "sink %s\t%d\t%.2f\t%.2f\t%.2f\t\n", s, l.N, l.P50, l.P95, l.P99)
			}
		}
		for _, s := range sortedKeys(run.Direct) {
			l := run.Direct[s]
			fmt.Fprintf(tw, "direct %s\t%d\t%.2f\t%.2f\t%.2f\t\n", s, l.N, l.P50, l.P95, l.P99)
		}
		for _, o := range run.Overhead {
			fmt.Fprintf(tw, "overhead %s−%s\t\t%+.2f\t%+.2f\t%+.2f\t\n", o.Series, o.Tool, o.P50, o.P95, o.P99)
		}
		_ = tw.Flush()
		if f := run.Floor; f != nil {
			writeFloor(w, f)
		}
		for _, c := range run.Checks {
			fmt.Fprintf(w, "  %-4s %-26s %s\n", c.Status, c.Name, c.Detail)
			for _, e := range c.Errors {
				fmt.Fprintf(w, "         %s\n", e)
			}
		}
	}
	if len(r.Compare) > 0 {
		fmt.Fprintf(w, "\n== sidecar against standalone (runs of one concurrency made one after the other)\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "concurrency\tcalls/s ×\tsink CPU/call ×\thot overhead p50 ms standalone\tsidecar\t")
		for _, c := range r.Compare {
			cpu, sa, sc := "-", "-", "-"
			if c.CPUPerCall > 0 {
				cpu = fmt.Sprintf("%.2f", c.CPUPerCall)
			}
			if c.HotOverheadSA != nil && c.HotOverheadSC != nil {
				sa, sc = fmt.Sprintf("%+.2f", *c.HotOverheadSA), fmt.Sprintf("%+.2f", *c.HotOverheadSC)
			}
			fmt.Fprintf(tw, "%d\t%.2f\t%s\t%s\t%s\t\n", c.Concurrency, c.Throughput, cpu, sa, sc)
		}
		_ = tw.Flush()
	}
	verdict := "PASS: every invariant held in every run"
	if !r.Pass {
		verdict = "FAIL: see the runs above"
	}
	fmt.Fprintf(w, "\n%s\n", verdict)
}

// writeFloor writes the API floor of a run.
func writeFloor(w io.Writer, f *FloorReport) {
	fmt.Fprintf(w, "API floor (the mix's fewest API writes, straight to the same API server, no sink): %.1f calls/s (%d calls, %d writes in %.1fs), protected p99 %.2f ms\n",
		f.Throughput, f.Calls, f.Writes, f.Elapsed, f.ProtectedP99)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tn\tp50 ms\tp95 ms\tp99 ms\t")
	for _, s := range gateSeries {
		if l, ok := f.Series[s]; ok {
			fmt.Fprintf(tw, "floor %s\t%d\t%.2f\t%.2f\t%.2f\t\n", s, l.N, l.P50, l.P95, l.P99)
		}
	}
	_ = tw.Flush()
}

func writeJSON(path string, r Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// apiRequests reads the kube-apiserver's own count of the requests it served
// (apiserver_request_total on /metrics), summed by verb and resource ("create leases").
func apiRequests(ctx context.Context, cs kubernetes.Interface) (map[string]float64, error) {
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseRequestTotals(bytes.NewReader(b))
}

// parseRequestTotals sums the apiserver_request_total samples of a Prometheus text exposition
// by verb and resource (with the subresource, "patch acts/status"). Other metrics are skipped;
// a sample of that metric that does not parse is an error.
func parseRequestTotals(r io.Reader) (map[string]float64, error) {
	const name = "apiserver_request_total{"
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < len(name) {
			return nil, fmt.Errorf("apiserver_request_total: no closing brace in %q", clipLine(line))
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("apiserver_request_total: value of %q: %w", clipLine(line), err)
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len(name):end], ",") {
			k, val, ok := strings.Cut(kv, "=")
			if !ok || len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
				return nil, fmt.Errorf("apiserver_request_total: label %q of %q", kv, clipLine(line))
			}
			labels[k] = val[1 : len(val)-1]
		}
		key := strings.ToLower(labels["verb"]) + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("apiserver_request_total: %w", err)
	}
	return out, nil
}

// requestDelta is after minus before, without the keys that did not change, as
// "verb resource n" sorted by count, highest first.
func requestDelta(before, after map[string]float64) (lines []string, total float64) {
	type kv struct {
		k string
		n float64
	}
	var d []kv
	for k, n := range after {
		if n -= before[k]; n > 0 {
			d = append(d, kv{k, n})
			total += n
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].n > d[j].n || (d[i].n == d[j].n && d[i].k < d[j].k) })
	for _, e := range d {
		lines = append(lines, fmt.Sprintf("%s %.0f", e.k, e.n))
	}
	return lines, total
}

func clipLine(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

package main

import (
	"strings"
	"testing"
)

func TestParseRequestTotals(t *testing.T) {
	in := `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="POST",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="actgate.io",resource="acts",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 2.0
apiserver_request_duration_seconds_count{verb="GET"} 9
`
	got, err := parseRequestTotals(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got["post leases"] != 4 || got["patch acts/status"] != 2 || len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	lines, total := requestDelta(map[string]float64{"post leases": 1}, got)
	if total != 5 || len(lines) != 2 || lines[0] != "post leases 3" || lines[1] != "patch acts/status 2" {
		t.Fatalf("delta %v total %v", lines, total)
	}
	for _, bad := range []string{
		`apiserver_request_total{verb="GET" 1`,
		`apiserver_request_total{verb="GET"} x`,
		`apiserver_request_total{verb=GET} 1`,
		`apiserver_request_total{verb} 1`,
		`apiserver_request_total{verb="GET"}`,
	} {
		if _, err := parseRequestTotals(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseRequestTotals(f *testing.F) {
	f.Add(`apiserver_request_total{verb="GET",resource="pods"} 1`)
	f.Add(`apiserver_request_total{} 1`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseRequestTotals(strings.NewReader(s))
	})
}

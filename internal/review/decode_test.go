package review

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/ef"
)

const (
	goodReview  = `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u-1","operation":"Review","server":"payments","act":{"version":"1.0"},"arguments":{"amount":"10.00"}}}`
	goodReport  = `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u-3","operation":"Report","report":{"authorityID":"authz-0000000000000000000000000000000000000000000000000000000000000000","operationID":"op-1","state":"EXECUTED","evidenceDigest":"sha256:3333333333333333333333333333333333333333333333333333333333333333"}}}`
	goodConsume = `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u-2","operation":"Consume","consume":{"authorityID":"authz-0000000000000000000000000000000000000000000000000000000000000000","operationID":"op-1","binding":{"actID":"act-1","argumentsDigest":"sha256:1111111111111111111111111111111111111111111111111111111111111111","actionDigest":"sha256:2222222222222222222222222222222222222222222222222222222222222222","tool":"send_payment","destination":"https://payments.example/mcp","sinkID":"sink-a","policyEpoch":"3"}}}}`
)

func TestDecodeRequestAccepts(t *testing.T) {
	r, uid, err := DecodeRequest([]byte(goodReview))
	if err != nil {
		t.Fatal(err)
	}
	if uid != "u-1" || r.Request.Operation != OperationReview || r.Request.Server != "payments" || string(r.Request.Arguments) != `{"amount":"10.00"}` {
		t.Fatalf("decoded %+v", r.Request)
	}
	// A Review may name the operation a grant is consumed by.
	withOp := strings.Replace(goodReview, `"server"`, `"permit":{"operationID":"op-9"},"server"`, 1)
	if r, _, err = DecodeRequest([]byte(withOp)); err != nil || r.Request.Permit == nil || r.Request.Permit.OperationID != "op-9" {
		t.Fatalf("review with a consuming operation: %v %+v", err, r)
	}
	r, uid, err = DecodeRequest([]byte(goodConsume))
	if err != nil {
		t.Fatal(err)
	}
	c := r.Request.Consume
	if uid != "u-2" || c.OperationID != "op-1" || c.Binding.In("agents").Namespace != "agents" || c.Binding.Tool != "send_payment" {
		t.Fatalf("decoded %+v", c)
	}
	r, uid, err = DecodeRequest([]byte(goodReport))
	if err != nil {
		t.Fatal(err)
	}
	if rp := r.Request.Report; uid != "u-3" || rp.OperationID != "op-1" || rp.State != "EXECUTED" || rp.EvidenceDigest != "sha256:"+strings.Repeat("3", 64) {
		t.Fatalf("decoded %+v", rp)
	}
	withAct := strings.Replace(goodReport, `"authorityID"`, `"actID":"act-7","authorityID"`, 1)
	if r, _, err = DecodeRequest([]byte(withAct)); err != nil || r.Request.Report.ActID != "act-7" {
		t.Fatalf("report with an act ID: %v %+v", err, r)
	}
	// INDETERMINATE needs no evidence.
	ind := strings.Replace(strings.Replace(goodReport, `"EXECUTED"`, `"INDETERMINATE"`, 1), `,"evidenceDigest":"sha256:3333333333333333333333333333333333333333333333333333333333333333"`, ``, 1)
	if r, _, err = DecodeRequest([]byte(ind)); err != nil || r.Request.Report.State != "INDETERMINATE" || r.Request.Report.EvidenceDigest != "" {
		t.Fatalf("INDETERMINATE without evidence: %v", err)
	}
}

// TestDecodeRequestRefuses: bad input gives a FieldError naming the member, never a panic and
// never a request.
func TestDecodeRequestRefuses(t *testing.T) {
	replace := func(base, old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("test input lacks %q", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	cases := []struct {
		name, body, field string
		uid               types.UID
	}{
		{"empty", ``, "$", ""},
		{"not JSON", `hello`, "$", ""},
		{"array", `[]`, "$", ""},
		{"trailing data", goodReview + `{}`, "$", ""},
		{"not UTF-8", "{\"apiVersion\":\"\xff\"}", "$", ""},
		{"too large", `{"kind":"` + strings.Repeat("a", MaxReviewBytes) + `"}`, "$", ""},
		{"unknown member", replace(goodReview, `"server"`, `"serverx":"a","server"`), "$", ""},
		{"duplicate member", replace(goodReview, `"server":"payments"`, `"server":"payments","server":"other"`), "$", ""},
		{"case-folded member", replace(goodReview, `"request"`, `"Request"`), "$", ""},
		{"wrong apiVersion", replace(goodReview, `review.actgate.io/v1alpha1`, `admission.k8s.io/v1`), "apiVersion", "u-1"},
		{"wrong kind", replace(goodReview, `"ActReview"`, `"AdmissionReview"`), "kind", "u-1"},
		{"no request", `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview"}`, "request", ""},
		{"carries a response", replace(goodReview, `"request"`, `"response":{"uid":"x","allowed":true},"request"`), "response", "u-1"},
		{"no uid", replace(goodReview, `"uid":"u-1",`, ``), "request.uid", ""},
		{"uid too long", replace(goodReview, `"u-1"`, `"`+strings.Repeat("u", MaxUIDLength+1)+`"`), "request.uid", ""},
		{"uid with control character", replace(goodReview, `"u-1"`, `"u\n1"`), "request.uid", ""},
		{"uid not a string", replace(goodReview, `"u-1"`, `1`), "$", ""},
		{"unknown operation", replace(goodReview, `"Review"`, `"Invoke"`), "request.operation", "u-1"},
		{"review without server", replace(goodReview, `"server":"payments",`, ``), "request.server", "u-1"},
		{"review with bad server", replace(goodReview, `"payments"`, `"Payments Server"`), "request.server", "u-1"},
		{"review without act", replace(goodReview, `"act":{"version":"1.0"},`, ``), "request.act", "u-1"},
		{"review with act array", replace(goodReview, `{"version":"1.0"}`, `[1]`), "request.act", "u-1"},
		{"review without arguments", replace(goodReview, `,"arguments":{"amount":"10.00"}`, ``), "request.arguments", "u-1"},
		{"review with string arguments", replace(goodReview, `{"amount":"10.00"}`, `"amount"`), "request.arguments", "u-1"},
		{"review with consume", replace(goodReview, `"server"`, `"consume":{},"server"`), "request.consume", "u-1"},
		{"consume without body", replace(goodConsume, `"consume":`, `"consumex":`), "$", ""},
		{"consume with act", replace(goodConsume, `"consume"`, `"act":{},"consume"`), "request", "u-2"},
		{"consume with bad authority ID", replace(goodConsume, `authz-0000`, `authz-../`), "request.consume.authorityID", "u-2"},
		{"consume without operation", replace(goodConsume, `"op-1"`, `""`), "request.consume.operationID", "u-2"},
		{"consume with long operation", replace(goodConsume, `"op-1"`, `"`+strings.Repeat("o", 300)+`"`), "request.consume.operationID", "u-2"},
		{"consume with bad digest", replace(goodConsume, `sha256:1111`, `sha256:XXXX`), "request.consume.binding", "u-2"},
		{"consume without sink", replace(goodConsume, `"sink-a"`, `""`), "request.consume.binding", "u-2"},
		{"consume with report", replace(goodConsume, `"consume"`, `"report":{},"consume"`), "request.report", "u-2"},
		{"review with report", replace(goodReview, `"server"`, `"report":{},"server"`), "request.report", "u-1"},
		{"review with permit without operation", replace(goodReview, `"server"`, `"permit":{"operationID":""},"server"`), "request.permit.operationID", "u-1"},
		{"review with permit of long operation", replace(goodReview, `"server"`, `"permit":{"operationID":"`+strings.Repeat("o", 300)+`"},"server"`), "request.permit.operationID", "u-1"},
		{"review with permit of bad UTF-8", replace(goodReview, `"server"`, "\"permit\":{\"operationID\":\"op\xff\"},\"server\""), "$", ""},
		{"review with permit and refusal", replace(goodReview, `"server"`, `"permit":{"operationID":"op-1"},"refusal":{"code":"EF_005"},"server"`), "request.refusal", "u-1"},
		{"report without body", replace(goodReport, `"report":`, `"reportx":`), "$", ""},
		{"report with null body", replace(goodReport, `"operation":"Report","report":{`, `"operation":"Report","report":null,"x":{`), "$", ""},
		{"report with act", replace(goodReport, `"report"`, `"act":{},"report"`), "request", "u-3"},
		{"report with server", replace(goodReport, `"report"`, `"server":"payments","report"`), "request", "u-3"},
		{"report with consume", replace(goodReport, `"report"`, `"consume":{},"report"`), "request.consume", "u-3"},
		{"report missing", `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u-3","operation":"Report"}}`, "request.report", "u-3"},
		{"report with empty-looking act ID", replace(goodReport, `"authorityID"`, `"actID":" ","authorityID"`), "request.report.actID", "u-3"},
		{"report with act ID holding a space", replace(goodReport, `"authorityID"`, `"actID":"act 1","authorityID"`), "request.report.actID", "u-3"},
		{"report with act ID holding a control", replace(goodReport, `"authorityID"`, `"actID":"act\u0000","authorityID"`), "request.report.actID", "u-3"},
		{"report with long act ID", replace(goodReport, `"authorityID"`, `"actID":"`+strings.Repeat("a", 257)+`","authorityID"`), "request.report.actID", "u-3"},
		{"report with bad authority ID", replace(goodReport, `authz-0000`, `authz-../`), "request.report.authorityID", "u-3"},
		{"report without operation", replace(goodReport, `"op-1"`, `""`), "request.report.operationID", "u-3"},
		{"report with long operation", replace(goodReport, `"op-1"`, `"`+strings.Repeat("o", 300)+`"`), "request.report.operationID", "u-3"},
		{"report of INVOKED", replace(goodReport, `"EXECUTED"`, `"INVOKED"`), "request.report.state", "u-3"},
		{"report of CONSUMED", replace(goodReport, `"EXECUTED"`, `"CONSUMED"`), "request.report.state", "u-3"},
		{"report of EXPIRED", replace(goodReport, `"EXECUTED"`, `"EXPIRED"`), "request.report.state", "u-3"},
		{"report of lowercase state", replace(goodReport, `"EXECUTED"`, `"executed"`), "request.report.state", "u-3"},
		{"report without state", replace(goodReport, `"state":"EXECUTED",`, ``), "request.report.state", "u-3"},
		{"EXECUTED without evidence", replace(goodReport, `,"evidenceDigest":"sha256:3333333333333333333333333333333333333333333333333333333333333333"`, ``), "request.report.evidenceDigest", "u-3"},
		{"FAILED without evidence", replace(replace(goodReport, `"EXECUTED"`, `"FAILED"`), `,"evidenceDigest":"sha256:3333333333333333333333333333333333333333333333333333333333333333"`, ``), "request.report.evidenceDigest", "u-3"},
		{"evidence in uppercase hex", replace(goodReport, `sha256:3333333333333333333333333333333333333333333333333333333333333333`, `sha256:`+strings.Repeat("A", 64)), "request.report.evidenceDigest", "u-3"},
		{"evidence of another algorithm", replace(goodReport, `sha256:3333`, `sha512:3333`), "request.report.evidenceDigest", "u-3"},
		{"evidence too short", replace(goodReport, `sha256:3333`, `sha256:333`), "request.report.evidenceDigest", "u-3"},
		{"raw result instead of evidence", replace(goodReport, `"sha256:3333333333333333333333333333333333333333333333333333333333333333"`, `"10.00 paid"`), "request.report.evidenceDigest", "u-3"},
		{"report with a result member", replace(goodReport, `"state"`, `"result":"10.00","state"`), "$", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, uid, err := DecodeRequest([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %+v", r)
			}
			if r != nil {
				t.Fatal("a refused review returned a request")
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrBadReview) {
				t.Fatalf("error %v is not a FieldError", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("field %q (%v), want %q", fe.Field, err, tc.field)
			}
			if uid != tc.uid {
				t.Fatalf("uid %q, want %q", uid, tc.uid)
			}
			if strings.Contains(err.Error(), "10.00") {
				t.Fatal("the error repeats an argument value")
			}
		})
	}
}

func TestDecodeResponse(t *testing.T) {
	body, err := json.Marshal(ActReview{TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: Kind},
		Response: &Response{UID: "u-1", Allowed: false, Code: ef.EF060, Reason: ReasonTimeout, Retryable: true}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeResponse(body, "u-1")
	if err != nil || r.Code != ef.EF060 || !r.Retryable {
		t.Fatalf("DecodeResponse = %+v, %v", r, err)
	}
	for name, tc := range map[string]struct {
		body string
		uid  types.UID
	}{
		"other uid":     {string(body), "u-2"},
		"no response":   {`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview"}`, "u-1"},
		"with request":  {`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"u-1"},"response":{"uid":"u-1"}}`, "u-1"},
		"unknown field": {`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","response":{"uid":"u-1","allowed":true,"bypass":true}}`, "u-1"},
		"HTML":          {`<html>502 Bad Gateway</html>`, "u-1"},
	} {
		t.Run(name, func(t *testing.T) {
			if r, err := DecodeResponse([]byte(tc.body), tc.uid); err == nil {
				t.Fatalf("accepted %+v", r)
			}
		})
	}
}

func TestSignedAuthorityRoundTrip(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := authority.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	b := authority.Binding{
		ActID: "act-1", ArgumentsDigest: "sha256:" + strings.Repeat("1", 64), ActionDigest: "sha256:" + strings.Repeat("2", 64),
		Tool: "send_payment", Destination: "https://payments.example/mcp", SinkID: "sink-a", PolicyEpoch: "3", Namespace: "agents",
	}
	a, err := s.Sign(b, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Signed(a)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back SignedAuthority
	if err := json.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.Authority()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verifier().Verify(got, b, time.Now()); err != nil {
		t.Fatalf("round-tripped authority does not verify: %v", err)
	}
	if BindingOf(b).In("agents") != b {
		t.Fatal("BindingOf/In do not round-trip")
	}
	back.ID = "authz-" + strings.Repeat("0", 64)
	if _, err := back.Authority(); !errors.Is(err, authority.ErrInvalid) {
		t.Fatalf("mismatched ID: %v", err)
	}
	var none *SignedAuthority
	if _, err := none.Authority(); !errors.Is(err, authority.ErrInvalid) {
		t.Fatalf("nil authority: %v", err)
	}
}

// TestClient: the client sends the review with the bearer token and reads back only a
// response for its uid; a non-200 answer is never allowed, and an unreadable one is an error.
func TestClient(t *testing.T) {
	var gotAuth string
	status := http.StatusOK
	allowed := true
	mangle := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if r.URL.Path != Path || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var in ActReview
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		uid := in.Request.UID
		if mangle {
			uid = "someone-else"
		}
		SetLevel(w.Header(), Level)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(ActReview{TypeMeta: in.TypeMeta, Response: &Response{UID: uid, Allowed: allowed}})
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, HTTP: srv.Client(), Token: func() (string, error) { return "tok", nil }}
	ctx := context.Background()
	r, err := c.Do(ctx, Request{Operation: OperationReview})
	if err != nil || !r.Allowed || gotAuth != "Bearer tok" {
		t.Fatalf("Do = %+v, %v (auth %q)", r, err, gotAuth)
	}
	status = http.StatusUnauthorized
	if r, err := c.Do(ctx, Request{}); err != nil || r.Allowed {
		t.Fatalf("a 401 answer: %+v, %v; want a response that is not allowed", r, err)
	}
	status, mangle = http.StatusOK, true
	if _, err := c.Do(ctx, Request{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("an answer for another uid: %v", err)
	}
	srv.Close()
	if _, err := c.Do(ctx, Request{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a closed server: %v", err)
	}
	bad := &Client{URL: srv.URL, HTTP: http.DefaultClient, Token: func() (string, error) { return "", errors.New("no token") }}
	if _, err := bad.Do(ctx, Request{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no token: %v", err)
	}
}

// FuzzDecodeRequest: whatever the body, DecodeRequest never panics; it returns either a request
// that passed every check or a FieldError.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{goodReview, goodConsume, goodReport, ``,
		`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"x","operation":"Report","report":{"authorityID":"authz-0000000000000000000000000000000000000000000000000000000000000000","operationID":"o","state":"INDETERMINATE"}}}`, `{}`, `{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":null}`,
		`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ActReview","request":{"uid":"x","operation":"Consume","consume":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, uid, err := DecodeRequest(body)
		if err != nil {
			if r != nil || !errors.Is(err, ErrBadReview) {
				t.Fatalf("error %v with request %v", err, r)
			}
			if uid != "" && checkUID("uid", uid) != nil {
				t.Fatalf("returned an invalid uid %q", uid)
			}
			return
		}
		if r.Request == nil || checkUID("uid", r.Request.UID) != nil || uid != r.Request.UID {
			t.Fatalf("accepted a request without a valid uid: %+v", r)
		}
		switch r.Request.Operation {
		case OperationReview:
			if r.Request.Consume != nil || len(r.Request.Act) == 0 || len(r.Request.Arguments) == 0 {
				t.Fatalf("accepted an incomplete review: %+v", r.Request)
			}
		case OperationConsume:
			c := r.Request.Consume
			if c == nil || !authority.ValidID(c.AuthorityID) || c.Binding.In("ns").Validate() != nil {
				t.Fatalf("accepted an incomplete consume: %+v", r.Request)
			}
		case OperationReport:
			rp := r.Request.Report
			if rp == nil || r.Request.Consume != nil || len(r.Request.Act) != 0 || !authority.ValidID(rp.AuthorityID) ||
				!slices.Contains(ReportStates, rp.State) || (rp.EvidenceDigest != "" && !ValidDigest(rp.EvidenceDigest)) ||
				(rp.EvidenceDigest == "" && rp.State != "INDETERMINATE") {
				t.Fatalf("accepted an incomplete report: %+v", r.Request)
			}
		default:
			t.Fatalf("accepted operation %q", r.Request.Operation)
		}
	})
}

package review

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/jcs"
)

// TestParseLevel: one header of plain digits is a level; everything else a client or a
// proxy could send is ErrBadLevel, never a level, and no header is "not stated".
func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		level  int
		ok     bool
		bad    bool
	}{
		{"absent", nil, 0, false, false},
		{"one", []string{"1"}, 1, true, false},
		{"zero", []string{"0"}, 0, true, false},
		{"a future level", []string{"42"}, 42, true, false},
		{"six digits", []string{"999999"}, 999999, true, false},
		{"empty", []string{""}, 0, false, true},
		{"non-numeric", []string{"one"}, 0, false, true},
		{"hex", []string{"0x1"}, 0, false, true},
		{"negative", []string{"-1"}, 0, false, true},
		{"plus sign", []string{"+1"}, 0, false, true},
		{"leading zero", []string{"01"}, 0, false, true},
		{"decimal", []string{"1.0"}, 0, false, true},
		{"inner space", []string{"1 2"}, 0, false, true},
		{"trailing space", []string{"1 "}, 0, false, true},
		{"huge", []string{"99999999999999999999999"}, 0, false, true},
		{"seven digits", []string{"1000000"}, 0, false, true},
		{"a list in one header", []string{"1, 1"}, 0, false, true},
		{"two headers", []string{"1", "1"}, 0, false, true},
		{"two headers, one empty", []string{"1", ""}, 0, false, true},
		{"unicode digit", []string{"١"}, 0, false, true},
		{"NUL", []string{"1\x00"}, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level, ok, err := ParseLevel(tc.values)
			if tc.bad {
				if !errors.Is(err, ErrBadLevel) || ok || level != 0 {
					t.Fatalf("ParseLevel(%q) = %d %v %v, want ErrBadLevel", tc.values, level, ok, err)
				}
				return
			}
			if err != nil || ok != tc.ok || level != tc.level {
				t.Fatalf("ParseLevel(%q) = %d %v %v, want %d %v", tc.values, level, ok, err, tc.level, tc.ok)
			}
		})
	}
}

// TestSidecarLevelRange: a request without the header is level 1; the service serves
// MinSidecarLevel to Level and names the side that is out of range.
func TestSidecarLevelRange(t *testing.T) {
	h := http.Header{}
	if n, err := SidecarLevel(h); err != nil || n != MissingSidecarLevel || MissingSidecarLevel != 1 {
		t.Fatalf("no header: %d %v, want level 1", n, err)
	}
	h.Add(LevelHeader, "1")
	h.Add(LevelHeader, "1")
	if _, err := SidecarLevel(h); !errors.Is(err, ErrBadLevel) {
		t.Fatalf("two headers: %v", err)
	}
	for _, tc := range []struct {
		level int
		want  Reason
	}{
		{MinSidecarLevel - 1, ReasonSidecarTooOld}, {MinSidecarLevel, ""}, {Level, ""}, {Level + 1, ReasonSidecarTooNew}, {-5, ReasonSidecarTooOld},
	} {
		if got := CheckSidecarLevel(tc.level); got != tc.want {
			t.Errorf("CheckSidecarLevel(%d) = %q, want %q", tc.level, got, tc.want)
		}
	}
	if MinSidecarLevel > Level || MinServiceLevel > Level || MinServiceLevel < 1 {
		t.Fatalf("levels out of order: min sidecar %d, min service %d, level %d", MinSidecarLevel, MinServiceLevel, Level)
	}
}

// TestRequestUID: the uid of a body of another level's shape is read leniently, but only a
// valid one.
func TestRequestUID(t *testing.T) {
	for body, want := range map[string]string{
		`{"request":{"uid":"u-1","operation":"Review","newMember":{"x":1}}}`: "u-1",
		`{"kind":"ActReview","request":{"uid":"u-2"},"future":true}`:         "u-2",
		`{"request":{"uid":""}}`:                                  "",
		`{"request":{"uid":"a\u0000b"}}`:                          "",
		`{"request":{"uid":"` + strings.Repeat("u", 1000) + `"}}`: "",
		`{"request":"u-3"}`:                                       "",
		`not json`:                                                "",
		``:                                                        "",
	} {
		if got := RequestUID([]byte(body)); string(got) != want {
			t.Errorf("RequestUID(%.60s) = %q, want %q", body, got, want)
		}
	}
}

func FuzzRequestUID(f *testing.F) {
	f.Add([]byte(`{"request":{"uid":"u-1","x":1}}`))
	f.Add([]byte(`{"request":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if uid := RequestUID(body); uid != "" && checkUID("request.uid", uid) != nil {
			t.Fatalf("RequestUID returned an invalid uid %q", uid)
		}
	})
}

func FuzzParseLevel(f *testing.F) {
	for _, s := range []string{"1", "0", "", "-1", "01", "99999999999999999999", "1,1", " 1", "\xff"} {
		f.Add(s, false)
	}
	f.Add("1", true)
	f.Fuzz(func(t *testing.T, v string, twice bool) {
		values := []string{v}
		if twice {
			values = append(values, v)
		}
		level, ok, err := ParseLevel(values)
		if err != nil {
			if ok || level != 0 || !errors.Is(err, ErrBadLevel) {
				t.Fatalf("ParseLevel(%q) = %d %v %v", values, level, ok, err)
			}
			return
		}
		// Accepted: one header whose value is exactly the level's decimal form.
		if twice || !ok || level < 0 || strconv.Itoa(level) != v {
			t.Fatalf("ParseLevel(%q) accepted %d %v", values, level, ok)
		}
	})
}

// levelServer answers every endpoint of the protocol as a service stating level (header: the
// raw value, "" for none) would: a review allowed, a pod policy, an anchor.
func levelServer(t *testing.T) (*httptest.Server, *Client, func(header string, status int, reason Reason), *[]string) {
	t.Helper()
	var mu sync.Mutex
	header, status, reason := "1", http.StatusOK, Reason("")
	var sent []string // the level header of every request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h, st, rs := header, status, reason
		sent = append(sent, strings.Join(r.Header.Values(LevelHeader), ","))
		mu.Unlock()
		if h != "" {
			w.Header().Set(LevelHeader, h)
		}
		w.Header().Set("Content-Type", "application/json")
		if st != http.StatusOK && r.URL.Path != Path {
			w.WriteHeader(st)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Reason: metav1.StatusReason(rs)})
			return
		}
		switch r.URL.Path {
		case Path:
			var in ActReview
			_ = json.NewDecoder(r.Body).Decode(&in)
			w.WriteHeader(st)
			_ = json.NewEncoder(w).Encode(ActReview{TypeMeta: in.TypeMeta, Response: &Response{UID: in.Request.UID, Allowed: st == http.StatusOK, Reason: rs}})
		case PolicyPath:
			_, _ = w.Write([]byte(goodPodPolicy))
		case AnchorPath:
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Reason: metav1.StatusReason(ReasonAnchored)})
		}
	}))
	t.Cleanup(srv.Close)
	c := &Client{URL: srv.URL, HTTP: srv.Client(), Token: func() (string, error) { return "tok", nil }}
	set := func(h string, st int, rs Reason) {
		mu.Lock()
		header, status, reason = h, st, rs
		mu.Unlock()
	}
	return srv, c, set, &sent
}

// TestClientRefusesAnswersOfAnOlderService: every request states the sidecar's level; an
// answer that states none, or a level below MinServiceLevel, or one that does not parse, is
// not used on any endpoint — an allowed review is not returned, a policy not handed over —
// and the error is ErrServiceTooOld, which callers that only know ErrUnavailable treat as the
// service unavailable. An answer of a good level clears the status at once.
func TestClientRefusesAnswersOfAnOlderService(t *testing.T) {
	sv, pemText := anchorKey(t, "log")
	cp := anchor.ToAPI(signedCheckpoint(t, sv, 6, 3, jcs.Digest([]byte("head"))))
	_, c, set, sent := levelServer(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"review": func() error {
			r, err := c.Do(ctx, Request{Operation: OperationPermit})
			if err == nil && !r.Allowed {
				return errors.New("not allowed")
			}
			if err != nil && r != nil {
				t.Errorf("an error with a response: %+v", r)
			}
			return err
		},
		"pod policy": func() error {
			p, err := c.PodPolicy(ctx, "", 0)
			if err != nil && p != nil {
				t.Errorf("an error with a policy: %+v", p)
			}
			return err
		},
		"anchor": func() error { return c.PostAnchor(ctx, pemText, cp) },
	}
	if st := c.LevelStatus(); st.Seen || st.TooOld() || st.Problem() != "" {
		t.Fatalf("before any answer: %+v", st)
	}
	for name, call := range calls {
		for _, header := range []string{"", "0", "x", "1, 1"} {
			set(header, http.StatusOK, "")
			err := call()
			if !errors.Is(err, ErrServiceTooOld) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("%s, service level %q: %v, want ErrServiceTooOld", name, header, err)
			}
			if st := c.LevelStatus(); !st.TooOld() || st.Problem() == "" {
				t.Fatalf("%s, service level %q: status %+v", name, header, st)
			}
			set("1", http.StatusOK, "")
			if err := call(); err != nil {
				t.Fatalf("%s at level 1: %v", name, err)
			}
			if st := c.LevelStatus(); st.TooOld() || st.Problem() != "" || st.Level != 1 {
				t.Fatalf("%s at level 1: status %+v", name, st)
			}
		}
	}
	for i, v := range *sent {
		if v != strconv.Itoa(Level) {
			t.Fatalf("request %d stated level %q, want %d", i, v, Level)
		}
	}
}

// TestClientNamesARefusalOfItsLevel: a service of a good level that refuses this sidecar's
// level (SidecarTooOld, SidecarTooNew) ends the call with ErrSidecarRefused on every endpoint,
// and the status says which; too new counts as a service too old for this sidecar.
func TestClientNamesARefusalOfItsLevel(t *testing.T) {
	sv, pemText := anchorKey(t, "log")
	cp := anchor.ToAPI(signedCheckpoint(t, sv, 6, 3, jcs.Digest([]byte("head"))))
	_, c, set, _ := levelServer(t)
	ctx := context.Background()
	for _, reason := range []Reason{ReasonSidecarTooOld, ReasonSidecarTooNew} {
		set("1", http.StatusForbidden, reason)
		if r, err := c.Do(ctx, Request{Operation: OperationReview}); !errors.Is(err, ErrSidecarRefused) || r != nil {
			t.Fatalf("review refused %s: %+v %v", reason, r, err)
		}
		if _, err := c.PodPolicy(ctx, "", 0); !errors.Is(err, ErrSidecarRefused) || !errors.Is(err, ErrUnavailable) {
			t.Fatalf("pod policy refused %s: %v", reason, err)
		}
		if err := c.PostAnchor(ctx, pemText, cp); !errors.Is(err, ErrSidecarRefused) || errors.Is(err, anchor.ErrRefused) {
			t.Fatalf("anchor refused %s: %v", reason, err)
		}
		st := c.LevelStatus()
		if st.Refused != reason || st.TooOld() != (reason == ReasonSidecarTooNew) || !strings.Contains(st.Problem(), "refuses") {
			t.Fatalf("status %+v", st)
		}
		// Refused as too new is a service older than this sidecar: ErrServiceTooOld as well.
		if _, err := c.Do(ctx, Request{Operation: OperationReview}); errors.Is(err, ErrServiceTooOld) != (reason == ReasonSidecarTooNew) {
			t.Fatalf("review refused %s: %v", reason, err)
		}
	}
	// Another 403 of a good level is the service's ordinary refusal.
	set("1", http.StatusForbidden, ReasonNotGoverned)
	if r, err := c.Do(ctx, Request{Operation: OperationReview}); err != nil || r.Allowed || r.Reason != ReasonNotGoverned {
		t.Fatalf("not governed: %+v %v", r, err)
	}
	if st := c.LevelStatus(); st.Problem() != "" {
		t.Fatalf("status after an ordinary refusal: %+v", st)
	}
	if _, err := c.PodPolicy(ctx, "", 0); !errors.Is(err, ErrPolicyRefused) {
		t.Fatalf("pod policy not governed: %v", err)
	}
}

// TestClientIgnoresAnswersOutsideTheProtocol: an answer that is not the service's (an HTML
// error of a proxy, no header) is ErrUnavailable but says nothing of the service's level.
func TestClientIgnoresAnswersOutsideTheProtocol(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>502</html>"))
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, HTTP: srv.Client(), Token: func() (string, error) { return "tok", nil }}
	if _, err := c.Do(context.Background(), Request{Operation: OperationPermit}); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrServiceTooOld) {
		t.Fatalf("review: %v", err)
	}
	if _, err := c.PodPolicy(context.Background(), "", 0); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrServiceTooOld) {
		t.Fatalf("pod policy: %v", err)
	}
	if st := c.LevelStatus(); st.Seen {
		t.Fatalf("status %+v", st)
	}
}

package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The review protocol level is the contract between a sidecar and the authority service across
// a version skew (docs/architecture.md "Version skew between sidecars and the authority
// service"): during a `helm upgrade` the injector and the authority Deployment roll at the same
// time, so a new sidecar may meet an old service replica and an old sidecar a new one.
//
// Every request of a sidecar names its level in LevelHeader, and every answer of the service
// (refusals included, on every endpoint: reviews, the pod policy, receipt anchors) names the
// service's. Each side checks the other's:
//
//   - The service accepts sidecars of levels MinSidecarLevel to Level. A request of another
//     level, or whose header does not parse, is refused before anything is read from or written
//     to the API server (ReasonSidecarTooOld, ReasonSidecarTooNew: HTTP 403; ReasonBadRequest:
//     HTTP 400). A request without the header is level 1 (MissingSidecarLevel): level 1 is the
//     first release with levels, and the sidecars before it send none.
//   - A sidecar uses an answer only when it names a level of at least MinServiceLevel. An answer
//     without one (a service older than level 1) or below it is ErrServiceTooOld: the call is
//     refused as when the service is unavailable, never invoked, and the sidecar reports
//     diag.AuthorityTooOld until an answer of a good level arrives.
//
// The rule for changes: a new request member, operation or query parameter a service of the
// current Level would refuse raises Level, and the sidecar that sends it raises MinServiceLevel
// to match (an older service refuses it or is refused); the service keeps accepting the
// previous MinSidecarLevel for at least one release, so the sidecars of running pods keep
// working until they are restarted.
const (
	// LevelHeader carries the sender's level on every request and every answer.
	LevelHeader = "Actgate-Review-Level"
	// Level is this release's review protocol level: what its sidecars send and its service
	// states. Level 2 adds AgentTokenHeader.
	Level = 2
	// LevelAgentToken is the first level whose service verifies AgentTokenHeader. A sidecar
	// that sends the header uses only answers of this level or newer: an older service would
	// ignore the header and name the pod's service account as the agent.
	LevelAgentToken = 2
	// MinSidecarLevel is the lowest sidecar level this release's service accepts.
	MinSidecarLevel = 1
	// MinServiceLevel is the lowest service level this release's sidecar accepts answers from.
	MinServiceLevel = 1
	// MissingSidecarLevel is the level of a request without LevelHeader: the sidecars of the
	// releases before levels existed speak level 1.
	MissingSidecarLevel = 1
	// maxLevelDigits bounds the header's value: no level needs more.
	maxLevelDigits = 6
)

// Refusals of a request's level (HTTP 403).
const (
	// ReasonSidecarTooOld: the sidecar's level is below the service's MinSidecarLevel; the pod
	// must be restarted to get the current sidecar.
	ReasonSidecarTooOld Reason = "SidecarTooOld"
	// ReasonSidecarTooNew: the sidecar's level is above the service's Level; the control plane
	// must be upgraded (or the rollback finished by restarting the pod).
	ReasonSidecarTooNew Reason = "SidecarTooNew"
)

// LevelLine is the second line of `actgate version` and `actgate-controlplane version`: the
// level this release speaks and the ranges each side accepts.
func LevelLine() string {
	return fmt.Sprintf("review protocol level %d (the sidecar needs an authority service of level %d or newer; "+
		"the authority service serves sidecars of levels %d to %d)", Level, MinServiceLevel, MinSidecarLevel, Level)
}

// ErrBadLevel is returned by ParseLevel for a header that is not one level.
var ErrBadLevel = errors.New("review: malformed protocol level")

// ErrServiceTooOld wraps the error of a Client call whose answer names no level, or a level
// below MinServiceLevel, or refuses this sidecar as too new: the answer is not used. It wraps
// ErrUnavailable too, so a caller that only knows ErrUnavailable fails closed the same way.
var ErrServiceTooOld = fmt.Errorf("%w: the authority service is older than this sidecar accepts", ErrUnavailable)

// ErrSidecarRefused wraps the error of a Client call the service refused because of this
// sidecar's level (ReasonSidecarTooOld; with ErrServiceTooOld, ReasonSidecarTooNew). It wraps
// ErrUnavailable too: no service of a level this sidecar speaks answered.
var ErrSidecarRefused = fmt.Errorf("%w: the authority service refuses this sidecar's protocol level", ErrUnavailable)

// ParseLevel reads a LevelHeader from its values (http.Header.Values). No value is not
// present (ok false, no error); one value of 1 to 6 ASCII digits without a leading zero (or
// "0") is that level; anything else — empty, a sign, spaces inside, a list, two headers, more
// digits — is ErrBadLevel.
func ParseLevel(values []string) (level int, ok bool, err error) {
	switch len(values) {
	case 0:
		return 0, false, nil
	case 1:
	default:
		return 0, false, fmt.Errorf("%w: %d %s headers", ErrBadLevel, len(values), LevelHeader)
	}
	v := values[0]
	if v == "" || len(v) > maxLevelDigits || (len(v) > 1 && v[0] == '0') {
		return 0, false, fmt.Errorf("%w: %q", ErrBadLevel, clip(v))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false, fmt.Errorf("%w: %q", ErrBadLevel, clip(v))
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil { // unreachable with at most 6 digits; kept so a change of the bound cannot panic
		return 0, false, fmt.Errorf("%w: %q", ErrBadLevel, clip(v))
	}
	return n, true, nil
}

// SidecarLevel is the level of a sidecar's request: its LevelHeader, or MissingSidecarLevel
// without one. It returns ErrBadLevel for a header that does not parse.
func SidecarLevel(h http.Header) (int, error) {
	n, ok, err := ParseLevel(h.Values(LevelHeader))
	if err != nil {
		return 0, err
	}
	if !ok {
		return MissingSidecarLevel, nil
	}
	return n, nil
}

// RequestUID reads request.uid from a review body leniently (members it does not know are
// ignored), for the refusal of a sidecar of another level, whose body DecodeRequest may refuse
// for members added at that level: the refusal echoes the uid, so the sidecar reads it. ""
// when there is none, or it is not a valid uid.
func RequestUID(body []byte) types.UID {
	var r struct {
		Request *struct {
			UID types.UID `json:"uid"`
		} `json:"request"`
	}
	if json.Unmarshal(body, &r) != nil || r.Request == nil || checkUID("request.uid", r.Request.UID) != nil {
		return ""
	}
	return r.Request.UID
}

// CheckSidecarLevel is the service's check of a request: "" when the service serves a sidecar
// of level, else the reason it refuses it.
func CheckSidecarLevel(level int) Reason {
	switch {
	case level < MinSidecarLevel:
		return ReasonSidecarTooOld
	case level > Level:
		return ReasonSidecarTooNew
	}
	return ""
}

// SetLevel states level in h (the service's answers, the client's requests).
func SetLevel(h http.Header, level int) { h.Set(LevelHeader, strconv.Itoa(level)) }

// LevelStatus is what a Client learned of the service's level from its last answer.
type LevelStatus struct {
	// Seen is true once an answer of the protocol (an ActReview, a PodPolicy or a Status) has
	// arrived; the fields below describe the last one.
	Seen bool
	// Level is the level the answer stated (0: none, or a header that does not parse).
	Level int
	// Stated is true when the answer stated a level that parses.
	Stated bool
	// Refused is ReasonSidecarTooOld or ReasonSidecarTooNew when the service refused this
	// sidecar's level; "" otherwise.
	Refused Reason
	// At is when the answer arrived.
	At time.Time
}

// TooOld reports whether the last answer came from a service older than this sidecar accepts:
// it states no level or one below MinServiceLevel, or it refuses this sidecar's level as too
// new (a control plane rolled back under a newer sidecar).
func (s LevelStatus) TooOld() bool {
	return s.Seen && (!s.Stated || s.Level < MinServiceLevel || s.Refused == ReasonSidecarTooNew)
}

// Problem says in a sentence what is wrong with the levels, or "" when nothing is.
func (s LevelStatus) Problem() string {
	switch {
	case !s.Seen:
		return ""
	case !s.Stated:
		return fmt.Sprintf("the authority service's answer states no review protocol level (a service older than level %d); "+
			"this sidecar (level %d) needs level %d or newer and refuses protected calls until it answers", MinServiceLevel, Level, MinServiceLevel)
	case s.Level < MinServiceLevel:
		return fmt.Sprintf("the authority service speaks review protocol level %d; this sidecar (level %d) needs level %d or newer "+
			"and refuses protected calls until it answers", s.Level, Level, MinServiceLevel)
	case s.Refused == ReasonSidecarTooNew:
		return fmt.Sprintf("the authority service (level %d) refuses this sidecar's review protocol level %d as too new; "+
			"protected calls are refused until a service of level %d or newer answers", s.Level, Level, Level)
	case s.Refused == ReasonSidecarTooOld:
		return fmt.Sprintf("the authority service (level %d) refuses this sidecar's review protocol level %d as too old; "+
			"protected calls are refused until the pod runs a newer sidecar", s.Level, Level)
	}
	return ""
}

// levels is a Client's record of the last answer's level.
type levels struct {
	mu   sync.Mutex
	last LevelStatus
}

// observe records an answer of the protocol: its header and, for a refusal, its reason. It
// returns the error the call ends with when the answer may not be used (ErrServiceTooOld, or
// ErrSidecarRefused for a refusal of this sidecar's level), or nil.
func (l *levels) observe(h http.Header, reason Reason) error {
	n, ok, err := ParseLevel(h.Values(LevelHeader))
	st := LevelStatus{Seen: true, Level: n, Stated: ok && err == nil, At: time.Now()}
	if reason == ReasonSidecarTooOld || reason == ReasonSidecarTooNew {
		st.Refused = reason
	}
	l.mu.Lock()
	l.last = st
	l.mu.Unlock()
	switch {
	case st.Refused == ReasonSidecarTooNew:
		return fmt.Errorf("%w: %w (%s)", ErrServiceTooOld, ErrSidecarRefused, st.Problem())
	case st.TooOld():
		return fmt.Errorf("%w (%s)", ErrServiceTooOld, st.Problem())
	case st.Refused == ReasonSidecarTooOld:
		return fmt.Errorf("%w (%s)", ErrSidecarRefused, st.Problem())
	}
	return nil
}

func (l *levels) status() LevelStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

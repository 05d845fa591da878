package failpoint

import "errors"

// Point names one instant at which a failure can be injected.
type Point string

// The dispatch boundaries (package documentation).
const (
	BeforeConsume Point = "before-consume"
	AfterConsume  Point = "after-consume"
	AfterPending  Point = "after-pending"
	DuringInvoke  Point = "during-invoke"
	AfterInvoke   Point = "after-invoke"
)

// Points lists every dispatch boundary, in dispatch order.
func Points() []Point {
	return []Point{BeforeConsume, AfterConsume, AfterPending, DuringInvoke, AfterInvoke}
}

// The boundaries of a binding moment's resolution in a sink with a MomentStore (package
// documentation).
const (
	MomentGranted Point = "moment-granted"
	MomentStored  Point = "moment-stored"
)

// MomentPoints lists the resolution boundaries, in order.
func MomentPoints() []Point { return []Point{MomentGranted, MomentStored} }

// EnvVar is the environment variable a failpoints build reads.
const EnvVar = "ACTGATE_FAILPOINT"

// ErrInjected is what Inject returns at a point whose action is "error".
var ErrInjected = errors.New("failpoint: injected error")

// Action is what happens at the selected point.
type Action string

// Actions (package documentation); sleep carries its duration after the colon.
const (
	ActionKill  Action = "kill"
	ActionSleep Action = "sleep"
	ActionError Action = "error"
)

// Enabled reports whether this binary was built with the failpoints tag.
func Enabled() bool { return enabled }

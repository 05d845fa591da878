package failpoint

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrSpec is returned by Parse for a value of ACTGATE_FAILPOINT that names no point or action.
var ErrSpec = errors.New("failpoint: invalid ACTGATE_FAILPOINT")

// Spec is a parsed ACTGATE_FAILPOINT value.
type Spec struct {
	Point  Point
	Action Action
	// Sleep is the duration of ActionSleep.
	Sleep time.Duration
}

// String is the spec as ACTGATE_FAILPOINT spells it.
func (s Spec) String() string {
	switch s.Action {
	case ActionSleep:
		return fmt.Sprintf("%s=%s:%s", s.Point, ActionSleep, s.Sleep)
	case ActionKill, "":
		return string(s.Point)
	}
	return string(s.Point) + "=" + string(s.Action)
}

// Parse reads "<point>[=<action>]". It is pure (the failpoints build calls it on the
// environment; tests call it directly).
func Parse(v string) (Spec, error) {
	name, action, hasAction := strings.Cut(v, "=")
	s := Spec{Point: Point(name), Action: ActionKill}
	known := false
	for _, p := range append(Points(), MomentPoints()...) {
		known = known || p == s.Point
	}
	if !known {
		return Spec{}, fmt.Errorf("%w: unknown point %q", ErrSpec, name)
	}
	if !hasAction {
		return s, nil
	}
	kind, arg, hasArg := strings.Cut(action, ":")
	switch Action(kind) {
	case ActionKill, ActionError:
		if hasArg {
			return Spec{}, fmt.Errorf("%w: action %q takes no argument", ErrSpec, kind)
		}
		s.Action = Action(kind)
	case ActionSleep:
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return Spec{}, fmt.Errorf("%w: sleep needs a non-negative duration, got %q", ErrSpec, arg)
		}
		s.Action, s.Sleep = ActionSleep, d
	default:
		return Spec{}, fmt.Errorf("%w: unknown action %q", ErrSpec, action)
	}
	return s, nil
}

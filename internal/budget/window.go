package budget

import (
	"errors"
	"fmt"
	"time"

	// The binary carries the IANA database, so a calendar window's zone resolves the same on
	// every host, with or without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// Calendar window units (api/v1alpha1 BudgetCalendar).
const (
	CalendarDay   = "Day"
	CalendarWeek  = "Week"
	CalendarMonth = "Month"
)

// Bounds of a rolling window, as the CRD's schema states them.
const (
	MinPeriod = time.Minute
	MaxPeriod = 2232 * time.Hour
	// SubBuckets is how many equal parts a rolling window is counted in: a charge is recorded
	// at the end of its part and leaves the window a whole period after that, so the count is
	// never below the true rolling count (at most one part's width too long).
	SubBuckets = 60
)

// ErrWindow marks an invalid window.
var ErrWindow = errors.New("budget: invalid window")

// Window is a rolling period or a calendar unit in a zone.
type Window struct {
	// Period is the rolling window's length; 0 for a calendar window.
	Period time.Duration
	// Calendar is CalendarDay, CalendarWeek or CalendarMonth; empty for a rolling window.
	Calendar string
	// Location is the calendar window's zone (UTC when nil).
	Location *time.Location
}

// NewWindow checks and builds a window from the API's fields: exactly one of period and
// calendar; a zone only with a calendar (default UTC).
func NewWindow(period time.Duration, calendar, zone string) (Window, error) {
	switch {
	case period != 0 && calendar != "":
		return Window{}, fmt.Errorf("%w: set exactly one of period and calendar", ErrWindow)
	case period != 0:
		if zone != "" {
			return Window{}, fmt.Errorf("%w: timeZone applies only to a calendar window", ErrWindow)
		}
		if period < MinPeriod || period > MaxPeriod {
			return Window{}, fmt.Errorf("%w: period %s is outside %s..%s", ErrWindow, period, MinPeriod, MaxPeriod)
		}
		return Window{Period: period}, nil
	case calendar == "":
		return Window{}, fmt.Errorf("%w: set exactly one of period and calendar", ErrWindow)
	}
	switch calendar {
	case CalendarDay, CalendarWeek, CalendarMonth:
	default:
		return Window{}, fmt.Errorf("%w: calendar %q is not Day, Week or Month", ErrWindow, calendar)
	}
	loc := time.UTC
	if zone != "" {
		if len(zone) > 64 || zone == "Local" {
			return Window{}, fmt.Errorf("%w: timeZone %q is not an IANA zone name", ErrWindow, zone)
		}
		l, err := time.LoadLocation(zone)
		if err != nil {
			return Window{}, fmt.Errorf("%w: timeZone %q: %w", ErrWindow, zone, err)
		}
		loc = l
	}
	return Window{Calendar: calendar, Location: loc}, nil
}

// Rolling reports whether w is a rolling window.
func (w Window) Rolling() bool { return w.Period > 0 }

// Span is where a charge made at some instant sits.
type Span struct {
	// Start and End are the window the charge is counted in: for a calendar window its start
	// and end; for a rolling window the period before the charge's sub-bucket ends, and that end.
	Start, End time.Time
	// Until is when the charge stops counting: a calendar window's end, or a rolling window's
	// sub-bucket end plus the period.
	Until time.Time
}

// Span returns the span of a charge made at now.
func (w Window) Span(now time.Time) Span {
	if w.Rolling() {
		width := w.width()
		// The end of the sub-bucket holding now, on a grid anchored at the zero time.
		end := now.Truncate(width).Add(width)
		return Span{Start: end.Add(-w.Period), End: end, Until: end.Add(w.Period)}
	}
	start, end := w.calendarBounds(now)
	return Span{Start: start, End: end, Until: end}
}

// width is a rolling window's sub-bucket width (at least a second).
func (w Window) width() time.Duration {
	d := w.Period / SubBuckets
	if d < time.Second {
		d = time.Second
	}
	return d
}

// calendarBounds returns the calendar unit holding now in the window's zone. Day boundaries
// are local midnights, so a day is 23 or 25 hours long across a daylight-saving change.
func (w Window) calendarBounds(now time.Time) (time.Time, time.Time) {
	loc := w.Location
	if loc == nil {
		loc = time.UTC
	}
	t := now.In(loc)
	y, m, d := t.Date()
	switch w.Calendar {
	case CalendarWeek:
		// ISO weeks start on Monday.
		back := (int(t.Weekday()) + 6) % 7
		s := time.Date(y, m, d-back, 0, 0, 0, 0, loc)
		return s, time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case CalendarMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, loc), time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		return time.Date(y, m, d, 0, 0, 0, 0, loc), time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	}
}

// String describes the window for people: "24h0m0s rolling" or "Day in Europe/Berlin".
func (w Window) String() string {
	if w.Rolling() {
		return w.Period.String() + " rolling"
	}
	loc := w.Location
	if loc == nil {
		loc = time.UTC
	}
	return w.Calendar + " in " + loc.String()
}

// ident is the window's part of a ledger id: a calendar window's start (so each window has its
// own ledger), or the rolling period (one ledger whose charges age out).
func (w Window) ident(s Span) string {
	if w.Rolling() {
		return "rolling/" + w.Period.String()
	}
	return "calendar/" + w.Calendar + "/" + s.Start.UTC().Format(time.RFC3339)
}

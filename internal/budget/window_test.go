package budget

import (
	"errors"
	"testing"
	"time"
)

func TestNewWindowRefuses(t *testing.T) {
	bad := []struct {
		p       time.Duration
		cal, tz string
	}{
		{0, "", ""}, {time.Hour, "Day", ""}, {time.Hour, "", "UTC"}, {30 * time.Second, "", ""}, {MaxPeriod + time.Hour, "", ""},
		{0, "Year", ""}, {0, "day", ""}, {0, "Day", "Mars/Olympus"}, {0, "Day", "Local"}, {0, "Day", "../../etc/passwd"},
	}
	for _, c := range bad {
		if _, err := NewWindow(c.p, c.cal, c.tz); !errors.Is(err, ErrWindow) {
			t.Errorf("NewWindow(%s, %q, %q) = %v; want ErrWindow", c.p, c.cal, c.tz, err)
		}
	}
}

// TestCalendarWindowDST: a Day window in Europe/Berlin runs from local midnight to local
// midnight, 23 hours on the spring change and 25 on the autumn one; Week starts on Monday;
// Month on the 1st.
func TestCalendarWindowDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	day, err := NewWindow(0, CalendarDay, "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		now        time.Time
		start, end time.Time
		hours      float64
	}{
		{time.Date(2026, 3, 29, 12, 0, 0, 0, berlin), time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 0, 0, 0, 0, berlin), 23},
		{time.Date(2026, 10, 25, 23, 59, 0, 0, berlin), time.Date(2026, 10, 25, 0, 0, 0, 0, berlin), time.Date(2026, 10, 26, 0, 0, 0, 0, berlin), 25},
		// 23:30 UTC on 6 Dec is already 7 Dec in Berlin.
		{time.Date(2026, 12, 6, 23, 30, 0, 0, time.UTC), time.Date(2026, 12, 7, 0, 0, 0, 0, berlin), time.Date(2026, 12, 8, 0, 0, 0, 0, berlin), 24},
	}
	for _, c := range cases {
		s := day.Span(c.now)
		if !s.Start.Equal(c.start) || !s.End.Equal(c.end) || !s.Until.Equal(c.end) || s.End.Sub(s.Start).Hours() != c.hours {
			t.Errorf("Day span of %s = %s..%s (until %s), want %s..%s (%gh)", c.now, s.Start, s.End, s.Until, c.start, c.end, c.hours)
		}
	}
	week, _ := NewWindow(0, CalendarWeek, "Europe/Berlin")
	s := week.Span(time.Date(2026, 12, 6, 22, 0, 0, 0, berlin)) // a Sunday
	if want := time.Date(2026, 11, 30, 0, 0, 0, 0, berlin); !s.Start.Equal(want) || !s.End.Equal(want.AddDate(0, 0, 7)) {
		t.Errorf("Week span = %s..%s, want from Monday %s", s.Start, s.End, want)
	}
	s = week.Span(time.Date(2026, 12, 7, 0, 0, 0, 0, berlin)) // Monday midnight starts a week
	if want := time.Date(2026, 12, 7, 0, 0, 0, 0, berlin); !s.Start.Equal(want) {
		t.Errorf("Week span at Monday 00:00 starts %s", s.Start)
	}
	month, _ := NewWindow(0, CalendarMonth, "")
	s = month.Span(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC))
	if !s.Start.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) || !s.End.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("Month span = %s..%s", s.Start, s.End)
	}
	// Each calendar window has its own ledger; a rolling window keeps one.
	ref := Ref{"ns", "p", "r"}
	a, _ := LedgerID(ref, "b", "k", day, day.Span(time.Date(2026, 3, 29, 23, 0, 0, 0, berlin)))
	b, _ := LedgerID(ref, "b", "k", day, day.Span(time.Date(2026, 3, 30, 0, 30, 0, 0, berlin)))
	if a == b {
		t.Error("two days share a ledger id")
	}
}

// TestRollingWindowNeverUnderCounts: a charge made at t counts at every instant before t+period
// (and stops at most one sub-bucket later).
func TestRollingWindowNeverUnderCounts(t *testing.T) {
	w, err := NewWindow(time.Hour, "", "")
	if err != nil {
		t.Fatal(err)
	}
	width := time.Hour / SubBuckets
	base := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 500; i++ {
		at := base.Add(time.Duration(i) * 7919 * time.Millisecond)
		s := w.Span(at)
		if s.Until.Before(at.Add(time.Hour)) {
			t.Fatalf("a charge at %s stops counting at %s, before %s", at, s.Until, at.Add(time.Hour))
		}
		if s.Until.After(at.Add(time.Hour + width)) {
			t.Fatalf("a charge at %s counts until %s, more than one sub-bucket too long", at, s.Until)
		}
	}
}

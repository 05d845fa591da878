package eventlog

import (
	"testing"
)

// event logs one event with id upID (the gate's own when "") and returns the id written.
func event(l *Log, upID string) string {
	buf, id := l.AppendID(nil, upID)
	l.Add(append(buf, "data: {}\n\n"...), id)
	return id
}

// TestSetBounds: a set keeps at most MaxLogs logs; a new log evicts the oldest finished one,
// and with every log unfinished there is none (the stream is not resumable); a released set
// gives every byte back and allocates nothing more.
func TestSetBounds(t *testing.T) {
	base := GateUsed()
	s := &Set{}
	var logs []*Log
	for range MaxLogs {
		l := s.New()
		if l == nil {
			t.Fatalf("no log %d of %d", len(logs)+1, MaxLogs)
		}
		event(l, "")
		logs = append(logs, l)
	}
	if s.New() != nil {
		t.Fatalf("a log beyond %d unfinished ones", MaxLogs)
	}
	logs[3].Finish() // kept (an event of the gate's own), and the oldest finished one
	l := s.New()
	if l == nil || s.Of(logs[3].Key()) != nil || s.Of(logs[2].Key()) == nil || !logs[3].Dropped() {
		t.Fatalf("a new log at the bound: %v; the finished log kept %v, an unfinished one kept %v",
			l != nil, s.Of(logs[3].Key()) != nil, s.Of(logs[2].Key()) != nil)
	}
	if s.Used() == 0 || GateUsed() == base {
		t.Fatal("the logs' bytes are not counted")
	}
	s.Release()
	if s.Used() != 0 || GateUsed() != base || s.New() != nil {
		t.Fatalf("after Release: the set holds %d bytes, the process %d more; a new log %v", s.Used(), GateUsed()-base, s.New() != nil)
	}
}

// TestSetFor: a resumption after one of the gate's own ids is the log's that wrote it; after
// an upstream id, the log's only while it is unfinished or has an event of the gate's own
// after it; a finished log of upstream ids alone is forgotten and its bytes given back.
func TestSetFor(t *testing.T) {
	s := &Set{}
	defer s.Release()
	a := s.New()
	up1 := event(a, "up-1")
	own := event(a, "")
	up2 := event(a, "up-2")
	for _, tc := range []struct {
		id   string
		want int
	}{{own, 1}, {up1, 0}, {up2, 2}} {
		if l, n := s.For(tc.id); l != a || n != tc.want {
			t.Fatalf("For(%q) while reading: %v, %d; want the log, %d", tc.id, l != nil, n, tc.want)
		}
	}
	a.Finish()
	if l, _ := s.For(up1); l != a {
		t.Fatal("an upstream id followed by the gate's own event: not answered from the log")
	}
	if l, _ := s.For(up2); l != nil {
		t.Fatal("an upstream id with only upstream events after it, the stream finished: answered from the log, want the upstream's")
	}
	if l, _ := s.For(Prefix + "g" + a.Key() + "-9"); l != nil {
		t.Fatal("a gate id the log never wrote was answered")
	}
	b := s.New()
	event(b, "up-3")
	used := s.Used()
	b.Finish()
	if s.Of(b.Key()) != nil || s.Used() >= used {
		t.Fatalf("a finished log of upstream ids: kept %v, the set holds %d bytes (was %d)", s.Of(b.Key()) != nil, s.Used(), used)
	}
}

// TestLogBounds: an event that takes a log beyond MaxLogLen drops it, giving its bytes back;
// a dropped log is still found for its own ids (the caller answers EF_STREAM_LOG_LIMIT) and
// returns no events.
func TestLogBounds(t *testing.T) {
	s := &Set{}
	defer s.Release()
	l := s.New()
	first := event(l, "")
	buf, id := l.AppendID(nil, "up")
	l.Add(append(buf, make([]byte, MaxLogLen)...), id)
	if !l.Dropped() || s.Used() != 0 {
		t.Fatalf("a log past MaxLogLen: dropped %v, the set holds %d bytes", l.Dropped(), s.Used())
	}
	if got, _ := s.For(first); got != l {
		t.Fatal("a dropped log's own id: not found")
	}
	if _, _, _, ok := l.After(0); ok {
		t.Fatal("a dropped log returned events")
	}
}

package eventlog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Prefix begins every event id of the gate's own, on answer streams (actgate:g{stream}-{n})
// and on the GET stream; an upstream id that begins with it is written "actgate:u:{id}", so
// that no upstream id can be taken for one of the gate's.
const Prefix = "actgate:"

// ParseID reads an answer-stream event id of the gate's own, actgate:g{stream}-{n} with both
// parts decimal; ok is false for anything else (an upstream id, or the GET stream's
// actgate:{n}:{up} and actgate:u:{up}).
func ParseID(id string) (key string, n int, ok bool) {
	rest, ok := strings.CutPrefix(id, Prefix+"g")
	if !ok || len(rest) > 64 {
		return "", 0, false
	}
	key, num, ok := strings.Cut(rest, "-")
	if !ok || !Decimal(key) || !Decimal(num) {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return "", 0, false
	}
	return key, n, true
}

// CheckLastEventID checks a Last-Event-ID the agent sent: at most wire.MaxEventID bytes, and
// no byte an event stream's id field cannot carry (NUL, CR, LF). Its content is otherwise the
// upstream's to judge.
func CheckLastEventID(id string) error {
	if len(id) > wire.MaxEventID {
		return fmt.Errorf("the Last-Event-ID is longer than %d bytes", wire.MaxEventID)
	}
	if strings.ContainsAny(id, "\x00\r\n") {
		return errors.New("the Last-Event-ID holds NUL, CR or LF")
	}
	return nil
}

// Decimal reports whether s is a non-empty run of ASCII digits.
func Decimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

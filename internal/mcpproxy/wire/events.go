package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxEventSize bounds one upstream message, in an event stream or a JSON body (the SDK
// client's default).
const MaxEventSize = mcp.DefaultMaxEventSize

// ErrNoAnswer: the upstream's answer ended without a response to the call.
var ErrNoAnswer = errors.New("mcpproxy: the upstream's answer ended without a response to the call")

// ErrUndecodable: the upstream's answer holds bytes that are not a JSON-RPC message. The
// decoder's own error (a JSON-RPC error value such as -32600) is kept out of the chain, so the
// outcome is not mistaken for the upstream refusing the call with that code: the call was sent
// and its outcome is unknown.
var ErrUndecodable = errors.New("mcpproxy: the upstream's answer is not a JSON-RPC message")

// ReadJSONAnswer reads a JSON body holding the response to id.
func ReadJSONAnswer(body io.Reader, id jsonrpc.ID) (*jsonrpc.Response, error) {
	raw, err := io.ReadAll(io.LimitReader(body, MaxEventSize+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxEventSize {
		return nil, fmt.Errorf("mcpproxy: upstream answer exceeds %d bytes", MaxEventSize)
	}
	msg, err := DecodeMessage(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUndecodable, err)
	}
	if r, ok := msg.(*jsonrpc.Response); ok && r.ID == id {
		return r, nil
	}
	return nil, ErrNoAnswer
}

// EventHooks are what a reader of an upstream event stream does beyond finding the response.
// Each is optional.
type EventHooks struct {
	// field is given every field but data and event; it reports whether the field set the
	// event's id.
	Field func(field, value []byte) (isID bool)
	// end is told each event's end (a blank line), before its message is handled.
	End func(hasID bool, data []byte)
	// request is given every request or notification before the response.
	Request func(*jsonrpc.Request)
}

// ScanEvents reads an upstream event stream until the response to id. Events are bounded by
// MaxEventSize; only events named "message" (or unnamed) carry JSON-RPC messages.
func ScanEvents(r *bufio.Reader, id jsonrpc.ID, h EventHooks) (*jsonrpc.Response, error) {
	var ev EventLines
	hasID := false
	for {
		line, err := ReadLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, ErrNoAnswer
			}
			return nil, err
		}
		if len(line) > 0 {
			switch field, value := ev.Field(line); string(field) {
			case "data":
				if len(ev.Data) > MaxEventSize {
					return nil, fmt.Errorf("mcpproxy: upstream event exceeds %d bytes", MaxEventSize)
				}
			case "event":
			default:
				if h.Field != nil && h.Field(field, value) {
					hasID = true
				}
			}
			continue
		}
		// A blank line ends the event.
		if h.End != nil {
			h.End(hasID, ev.Data)
		}
		if ev.HasData && len(ev.Data) > 0 && (ev.Name == "" || ev.Name == "message") {
			msg, err := DecodeMessage(ev.Data)
			if err != nil {
				return nil, fmt.Errorf("%w: upstream event: %v", ErrUndecodable, err)
			}
			switch m := msg.(type) {
			case *jsonrpc.Response:
				if m.ID == id {
					return m, nil
				}
			case *jsonrpc.Request:
				if h.Request != nil {
					h.Request(m)
				}
			}
		}
		ev.Reset()
		hasID = false
	}
}

// EventLines is one event of an event stream as its lines arrive: its data lines joined with
// "\n" and its name (WHATWG Server-Sent Events, "Interpreting an event stream").
type EventLines struct {
	Data    []byte
	Name    string
	HasData bool
}

// Field takes one non-blank line of the event: it adds a data line to the data and an event
// line's value as the name, and returns the line's field and value (one leading space off the
// value).
func (e *EventLines) Field(line []byte) (field, value []byte) {
	field, value, _ = bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
		if e.HasData {
			e.Data = append(e.Data, '\n')
		}
		e.Data = append(e.Data, value...)
		e.HasData = true
	case "event":
		e.Name = string(value)
	}
	return field, value
}

// Reset readies e for the next event, keeping its buffer.
func (e *EventLines) Reset() { e.Data, e.Name, e.HasData = e.Data[:0], "", false }

// MaxEventID bounds an upstream event id the proxy keeps to resume with.
const MaxEventID = 1024

// StreamReaders recycles readStream's buffers: one per event-stream answer was 4 KiB of
// garbage per call.
var StreamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// ReadLine reads one line of an event stream without its end (LF or CRLF).
func ReadLine(r *bufio.Reader) ([]byte, error) {
	line, isPrefix, err := r.ReadLine()
	if err != nil || !isPrefix {
		return line, err
	}
	long := append([]byte(nil), line...)
	for isPrefix {
		line, isPrefix, err = r.ReadLine()
		if err != nil {
			return nil, err
		}
		long = append(long, line...)
		if len(long) > MaxEventSize {
			return nil, fmt.Errorf("mcpproxy: upstream event exceeds %d bytes", MaxEventSize)
		}
	}
	return long, nil
}

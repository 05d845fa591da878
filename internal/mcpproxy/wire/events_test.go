package wire

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestScanEvents: the response to the call's id is found past events of other names, other
// ids' responses, comments and CRLF line ends; requests before it reach the hook; an id field
// is reported; a stream without the response, an undecodable message or an oversized event is
// an error, never a response.
func TestScanEvents(t *testing.T) {
	id, _ := jsonrpc.MakeID("actgate-1")
	answer := `{"jsonrpc":"2.0","id":"actgate-1","result":{"content":[]}}`
	for _, tc := range []struct {
		name, stream string
		requests     int
		ids          int
		err          error // nil: the response is found
	}{
		{"plain", "data: " + answer + "\n\n", 0, 0, nil},
		{"crlf, comment, id, retry", ": hi\r\nid: 7\r\nretry: 10\r\ndata: " + answer + "\r\n\r\n", 0, 1, nil},
		{"notification first", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: " + answer + "\n\n", 1, 0, nil},
		{"other event name skipped", "event: other\ndata: {\"x\":1}\n\ndata: " + answer + "\n\n", 0, 0, nil},
		{"data split over lines", "data: {\"jsonrpc\":\"2.0\",\ndata: \"id\":\"actgate-1\",\"result\":{}}\n\n", 0, 0, nil},
		{"another id's response", "data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}\n\n", 0, 0, ErrNoAnswer},
		{"empty", "", 0, 0, ErrNoAnswer},
		{"no blank line after the answer", "data: " + answer, 0, 0, ErrNoAnswer},
		{"not JSON-RPC", "data: {\"x\":1}\n\n", 0, 0, ErrUndecodable},
		{"not JSON", "data: nope\n\n", 0, 0, ErrUndecodable},
		{"oversized event", "data: " + strings.Repeat("x", MaxEventSize+1) + "\n\n", 0, 0, errors.New("size")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requests, ids := 0, 0
			resp, err := ScanEvents(bufio.NewReader(strings.NewReader(tc.stream)), id, EventHooks{
				Field:   func(field, _ []byte) bool { ok := string(field) == "id"; ids += map[bool]int{true: 1}[ok]; return ok },
				Request: func(*jsonrpc.Request) { requests++ },
			})
			switch {
			case tc.err == nil && (err != nil || resp == nil || resp.ID != id):
				t.Fatalf("ScanEvents = %v, %v; want the response", resp, err)
			case tc.err != nil && (err == nil || resp != nil):
				t.Fatalf("ScanEvents = %v, %v; want an error", resp, err)
			case tc.err != nil && tc.err.Error() != "size" && !errors.Is(err, tc.err):
				t.Fatalf("ScanEvents error %v; want %v", err, tc.err)
			}
			if requests != tc.requests || ids != tc.ids {
				t.Errorf("hooks saw %d requests and %d ids; want %d and %d", requests, ids, tc.requests, tc.ids)
			}
		})
	}
}

// TestReadJSONAnswer: a JSON body is the response to the call's id or an error: another id's
// response or a notification is ErrNoAnswer, bytes that are not a message are ErrUndecodable,
// and a body beyond MaxEventSize is refused.
func TestReadJSONAnswer(t *testing.T) {
	id, _ := jsonrpc.MakeID(float64(3))
	if r, err := ReadJSONAnswer(strings.NewReader(`{"jsonrpc":"2.0","id":3,"result":{}}`), id); err != nil || r.ID != id {
		t.Fatalf("ReadJSONAnswer = %v, %v", r, err)
	}
	for in, want := range map[string]error{
		`{"jsonrpc":"2.0","id":4,"result":{}}`: ErrNoAnswer,
		`{"jsonrpc":"2.0","method":"ping"}`:    ErrNoAnswer,
		`[]`:                                   ErrUndecodable,
		``:                                     ErrUndecodable,
	} {
		if r, err := ReadJSONAnswer(strings.NewReader(in), id); r != nil || !errors.Is(err, want) {
			t.Errorf("ReadJSONAnswer(%q) = %v, %v; want %v", in, r, err, want)
		}
	}
	if r, err := ReadJSONAnswer(strings.NewReader(strings.Repeat(" ", MaxEventSize+1)), id); r != nil || err == nil {
		t.Errorf("an oversized body: %v, %v; want an error", r, err)
	}
}

// TestAccepts: the Accept values the SDK admits for a POST's answer.
func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		in               []string
		jsonOK, streamOK bool
	}{
		{nil, false, false},
		{[]string{"application/json, text/event-stream"}, true, true},
		{[]string{"application/json", "text/event-stream;q=0.5"}, true, true},
		{[]string{"*/*"}, true, true},
		{[]string{"application/*"}, true, false},
		{[]string{" TEXT/Event-Stream "}, false, true},
		{[]string{"text/html, application/xml"}, false, false},
	} {
		if j, s := Accepts(tc.in); j != tc.jsonOK || s != tc.streamOK {
			t.Errorf("Accepts(%q) = %v, %v; want %v, %v", tc.in, j, s, tc.jsonOK, tc.streamOK)
		}
	}
}

// FuzzScanEvents: no stream panics the reader; a response it returns is the call's and came
// with no error.
func FuzzScanEvents(f *testing.F) {
	for _, s := range []string{"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", "id: 1\r\ndata: x\r\n\r\n", "event: message\ndata:\n\n", ":\n\n"} {
		f.Add([]byte(s))
	}
	id, _ := jsonrpc.MakeID(float64(1))
	f.Fuzz(func(t *testing.T, in []byte) {
		resp, err := ScanEvents(bufio.NewReader(strings.NewReader(string(in))), id, EventHooks{
			Field: func(_, _ []byte) bool { return true }, End: func(bool, []byte) {}, Request: func(*jsonrpc.Request) {},
		})
		if (resp == nil) == (err == nil) || (resp != nil && resp.ID != id) {
			t.Fatalf("ScanEvents(%q) = %v, %v", in, resp, err)
		}
		if r, err := ReadJSONAnswer(strings.NewReader(string(in)), id); (r == nil) == (err == nil) || (r != nil && r.ID != id) {
			t.Fatalf("ReadJSONAnswer(%q) = %v, %v", in, r, err)
		}
	})
}

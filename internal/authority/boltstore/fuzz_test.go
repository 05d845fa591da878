package boltstore

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
	"github.com/actgate/actgate/internal/journal"
)

// FuzzHandshake: whatever a peer writes first on the owner's socket, the handshake either
// accepts exactly "<protocol> <instance>\n" or refuses; it never panics.
func FuzzHandshake(f *testing.F) {
	f.Add([]byte(wire.Protocol + " in-0123456789abcdef0123456789abcdef\n"))
	f.Add([]byte(wire.Protocol + " in-0123456789abcdef0123456789abcdeF\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Add([]byte(wire.Protocol + "\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		server, client := net.Pipe()
		defer server.Close()
		go func() {
			_ = client.SetDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = client.Write(data)
			buf := make([]byte, 8)
			_, _ = client.Read(buf)
			client.Close()
		}()
		inst, err := acceptHandshake(server)
		if err != nil {
			return
		}
		want := wire.Protocol + " " + inst + "\n"
		if !validInstance(inst) || len(data) < len(want) || string(data[:len(want)]) != want {
			t.Fatalf("accepted %q from %q", inst, data)
		}
	})
}

// FuzzStoredRecords: bytes read back from the file that are not what this package wrote are a
// store failure (unavailable: fail closed), never a panic and never a usable authority.
func FuzzStoredRecords(f *testing.F) {
	f.Add([]byte(`{"payload":"e30=","signature":"","state":"ISSUED","consumed_at":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"state":"CONSUMED"}`))
	f.Add([]byte(`{"OperationID":"op","State":"INVOKED"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := decodeStored(data); err == nil {
			if _, err := st.record(); err != nil && !errors.Is(err, authority.ErrStoreUnavailable) {
				t.Fatalf("record error %v is not unavailable", err)
			}
		} else if !errors.Is(err, authority.ErrStoreUnavailable) {
			t.Fatalf("decode error %v is not unavailable", err)
		}
		if _, err := decodeRecord(data); err != nil && !errors.Is(err, journal.ErrUnavailable) {
			t.Fatalf("record decode error %v is not unavailable", err)
		}
	})
}

package boltstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actgate/actgate/internal/authority/boltstore/internal/wire"
)

const handshakeTimeout = 5 * time.Second

// errNotSent marks a request that never left this process because the connection to the owner
// had already ended; Store.do retries it once on a fresh connection (or as the new owner).
var errNotSent = errors.New("owner connection already closed, request not sent")

// server is the owner's side of shared mode: it executes other processes' operations on its
// local backend, one net/rpc server per connection so each knows its client's instance.
type server struct {
	l    *local
	ln   *net.UnixListener
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	live   map[string]int // client instance → open connections
}

// maxSocketPath is the longest unix socket path every platform accepts (sun_path is 108 bytes
// on Linux, 104 on the BSDs, including the terminating NUL).
const maxSocketPath = 103

func listen(sock string, l *local) (*server, error) {
	if len(sock) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, longer than %d: set Options.SocketPath", sock, len(sock), maxSocketPath)
	}
	// The owner holds the file lock, so any socket at sock is left over from a dead owner.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", sock, err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("restricting %s: %w", sock, err)
	}
	base, stop := context.WithCancel(context.Background())
	s := &server{l: l, ln: ln, base: base, stop: stop, conns: map[net.Conn]struct{}{}, live: map[string]int{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: back off, keep serving
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(conn)
	}
}

func (s *server) handle(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	// Only processes of this user may consume through the owner (the socket is 0600 as well).
	if err := checkPeer(conn); err != nil {
		return
	}
	inst, err := acceptHandshake(conn)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.live[inst]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.live[inst]--; s.live[inst] <= 0 {
			delete(s.live, inst)
		}
		s.mu.Unlock()
	}()
	rs := rpc.NewServer()
	if err := rs.RegisterName("Store", &rpcService{s: s, instance: inst}); err != nil {
		return
	}
	rs.ServeConn(conn) // returns when the connection closes and its calls have finished
}

// sessions lists the instances of connected clients.
func (s *server) sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.live))
	for in := range s.live {
		out = append(out, in)
	}
	return out
}

// close stops accepting, drops every connection and waits for in-flight operations to finish.
func (s *server) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.stop()
	s.wg.Wait()
}

type rpcService struct {
	s        *server
	instance string
}

// Do executes one operation for the connected client. Errors travel inside the response (their
// codes and text), so the method itself fails only if the server is shutting down.
func (r *rpcService) Do(req *wire.Request, resp *wire.Response) error {
	ctx := r.s.base
	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	out, err := r.s.l.do(ctx, r.instance, req)
	*resp = out
	encodeError(resp, err)
	return nil
}

func acceptHandshake(conn net.Conn) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	line, err := readLine(conn)
	if err != nil {
		return "", err
	}
	proto, inst, ok := strings.Cut(line, " ")
	if !ok || proto != wire.Protocol || !validInstance(inst) {
		return "", fmt.Errorf("bad handshake %q", line)
	}
	if _, err := conn.Write([]byte("ok\n")); err != nil {
		return "", err
	}
	_ = conn.SetDeadline(time.Time{})
	return inst, nil
}

func validInstance(s string) bool {
	if len(s) != 35 || !strings.HasPrefix(s, "in-") {
		return false
	}
	for _, c := range s[3:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// readLine reads up to '\n' one byte at a time, so nothing after the line is consumed before
// net/rpc takes over the connection.
func readLine(conn net.Conn) (string, error) {
	var b [1]byte
	var line []byte
	for len(line) < 128 {
		if _, err := conn.Read(b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("handshake line too long")
}

// client is a non-owner's connection to the owner.
type client struct {
	conn   net.Conn
	rpc    *rpc.Client
	broken atomic.Bool
}

func dial(ctx context.Context, sock, instance string) (*client, error) {
	var d net.Dialer
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	conn, err := d.DialContext(hctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	if dl, ok := hctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "%s %s\n", wire.Protocol, instance); err != nil {
		conn.Close()
		return nil, err
	}
	line, err := readLine(conn)
	if err != nil || line != "ok" {
		conn.Close()
		return nil, fmt.Errorf("owner refused the handshake (%q, %v)", line, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return &client{conn: conn, rpc: rpc.NewClient(conn)}, nil
}

func (c *client) do(ctx context.Context, _ string, req *wire.Request) (wire.Response, error) {
	if err := ctx.Err(); err != nil {
		return wire.Response{}, unavailable(err)
	}
	r := *req
	if dl, ok := ctx.Deadline(); ok {
		r.Deadline = dl
	}
	resp := new(wire.Response) // owned by the call: written by net/rpc even after we stop waiting
	call := c.rpc.Go(wire.RPCMethod, &r, resp, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
		if call.Error != nil {
			c.broken.Store(true)
			if notSent(call.Error) {
				return wire.Response{}, unavailable(fmt.Errorf("%w: %w", errNotSent, call.Error))
			}
			return wire.Response{}, unavailable(fmt.Errorf("owner connection: %w", call.Error))
		}
		if err := decodeError(resp); err != nil {
			return wire.Response{}, err
		}
		return *resp, nil
	case <-ctx.Done():
		// The owner may still execute the operation; the caller is told only "unavailable".
		return wire.Response{}, unavailable(ctx.Err())
	}
}

// notSent reports whether a net/rpc call error proves the owner never received the request:
// ErrShutdown (the client had already seen the connection end and sent nothing) or a failed
// write (the owner had closed its end; a request it did not read in full is never executed).
// A failure while reading the reply is ambiguous — the owner may have executed it — and is not
// retried.
func notSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, rpc.ErrShutdown) || (errors.As(err, &op) && op.Op == "write")
}

func (c *client) close() {
	c.broken.Store(true)
	c.rpc.Close()
}

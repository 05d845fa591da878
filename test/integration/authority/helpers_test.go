package authority

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/leasestore"
)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// clock is an injectable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(t time.Time) *clock { return &clock{now: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newSigner(t testing.TB) *authority.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := authority.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fastConfig copies cfg with client-side rate limits out of the way: the tests measure the
// API server, not client-go's default 5 QPS.
func fastConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5000, 10000
	return c
}

// newLeaseStore is one store client, as one authority replica would have: its own connection to
// the API server.
func newLeaseStore(t testing.TB, cfg *rest.Config, v *authority.Verifier, now func() time.Time) *leasestore.Store {
	t.Helper()
	s, err := leasestore.NewForConfig(fastConfig(cfg), leasestore.Options{Verifier: v, Now: now, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// slowProxy is a TCP proxy in front of the API server whose forwarding can be delayed, to make
// the API server slow without touching it. TLS passes through untouched.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds added before each chunk from client to server
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newSlowProxy(t testing.TB, cfg *rest.Config) (*slowProxy, *rest.Config) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: u.Host}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + ln.Addr().String()
	if c.TLSClientConfig.ServerName == "" {
		host, _, _ := net.SplitHostPort(u.Host)
		c.TLSClientConfig.ServerName = host
	}
	return p, c
}

func (p *slowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *slowProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); p.pipe(out, in, true) }()
		go func() { defer p.wg.Done(); p.pipe(in, out, false) }()
	}
}

func (p *slowProxy) pipe(dst, src net.Conn, delayed bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); delayed && d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			return
		}
	}
}

func (p *slowProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

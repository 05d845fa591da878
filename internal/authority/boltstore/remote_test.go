package boltstore

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// TestSharedClientSeesOwnerErrors: through the socket, every refusal arrives as the same
// sentinel the owner returned, and successes carry the same records.
func TestSharedClientSeesOwnerErrors(t *testing.T) {
	f := newFixture(t)
	owner := f.open(t, shared)
	cli := f.open(t, shared)
	if !owner.Owner() || cli.Owner() {
		t.Fatalf("owner flags: first %v, second %v", owner.Owner(), cli.Owner())
	}
	if fi, err := os.Stat(f.path + ".sock"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v, %v", fi, err)
	}
	a := f.sign(t, 1)
	if _, err := cli.Issue(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Issue(ctx, a); !errors.Is(err, authority.ErrAlreadyIssued) {
		t.Fatalf("Issue twice via client: %v", err)
	}
	wrong := a.Binding
	wrong.Destination = "https://evil.example/mcp"
	if _, err := cli.Consume(ctx, a.ID, wrong, authority.Consumption{OperationID: "op-1"}); !errors.Is(err, authority.ErrDestinationMismatch) || authority.CodeOf(err) != authority.CodeDestinationMismatch {
		t.Fatalf("destination mismatch via client: %v (code %s)", err, authority.CodeOf(err))
	}
	op := journal.NewOperationID()
	got, rec, err := cli.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, op), []byte("r"))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != authority.StateConsumed || rec.Instance != cli.Instance() || rec.State != journal.StateDispatchPending {
		t.Fatalf("ConsumeAndPend via client: %+v %+v", got, rec)
	}
	if _, err := owner.Consume(ctx, a.ID, a.Binding, authority.Consumption{OperationID: "op-2"}); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("owner consuming what the client consumed: %v", err)
	}
	if _, err := cli.Transition(ctx, op, journal.StateFailed, journal.Outcome{}); !errors.Is(err, journal.ErrEvidenceRequired) {
		t.Fatalf("FAILED without evidence via client: %v", err)
	}
	if _, err := cli.Record(ctx, "op-none"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("missing record via client: %v", err)
	}
	if rs, err := cli.ByAct(ctx, a.Binding.ActID); err != nil || len(rs) != 1 || rs[0].OperationID != op {
		t.Fatalf("ByAct via client: %v, %v", rs, err)
	}
	// InStateSince's bound crosses the socket.
	if rs, err := cli.InStateSince(ctx, journal.StateDispatchPending, rec.CreatedAt); err != nil || len(rs) != 1 {
		t.Fatalf("InStateSince via client, from the record's creation: %v, %v", rs, err)
	}
	if rs, err := cli.InStateSince(ctx, journal.StateDispatchPending, rec.CreatedAt.Add(time.Nanosecond)); err != nil || len(rs) != 0 {
		t.Fatalf("InStateSince via client, after the record's creation: %v, %v", rs, err)
	}
}

// TestSharedDeadline: the client's deadline bounds the call and travels to the owner.
func TestSharedDeadline(t *testing.T) {
	f := newFixture(t)
	owner := f.open(t, shared)
	cli := f.open(t, shared)
	auths := f.issueN(t, owner, 1)
	a := auths[0]
	tx, err := owner.own.db.Begin(true) // the owner cannot commit until released
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, _, err = cli.ConsumeAndPend(short, a.ID, a.Binding, pendingFor(a, "op-late"), nil)
	if !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		tx.Rollback()
		t.Fatalf("client past its deadline: %v", err)
	}
	// Queue a write behind it on the owner, release, and check the late consume did nothing.
	done := make(chan error, 1)
	go func() {
		_, err := owner.Begin(ctx, journal.DispatchRecord{
			OperationID: "op-probe", ActID: "act-probe", AuthorityID: "authz-probe", State: journal.StateConsumed,
			ActionDigest: digestOf("a"), ArgumentsDigest: digestOf("b"), Upstream: "u", Tool: "t",
		}, nil)
		done <- err
	}()
	waitQueued(owner.own.l.commit, 1)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := owner.Get(ctx, "", a.ID); got.State != authority.StateIssued {
		t.Fatalf("consume that missed its deadline took effect: %s", got.State)
	}
}

// TestRecoverOnStartSparesLiveSessions: in shared mode, recovery leaves the in-flight records
// of connected processes alone and promotes those of sessions that are gone.
func TestRecoverOnStartSparesLiveSessions(t *testing.T) {
	f := newFixture(t)
	owner := f.open(t, shared)
	auths := f.issueN(t, owner, 3)
	clientA := f.open(t, shared)
	clientB := f.open(t, shared)
	pend := func(s *Store, a authority.Authority) string {
		op := journal.NewOperationID()
		if _, _, err := s.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, op), nil); err != nil {
			t.Fatal(err)
		}
		return op
	}
	opOwner, opA, opB := pend(owner, auths[0]), pend(clientA, auths[1]), pend(clientB, auths[2])

	if n, err := clientB.RecoverOnStart(ctx); err != nil || n != 0 {
		t.Fatalf("RecoverOnStart with every writer connected: %d, %v", n, err)
	}
	if err := clientA.Close(); err != nil {
		t.Fatal(err)
	}
	// The owner sees the disconnect asynchronously.
	for deadline := time.Now().Add(2 * time.Second); len(owner.own.srv.sessions()) != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	n, err := clientB.RecoverOnStart(ctx)
	if err != nil || n != 1 {
		t.Fatalf("RecoverOnStart after one client left: %d, %v; want 1", n, err)
	}
	for op, want := range map[string]journal.State{opOwner: journal.StateDispatchPending, opA: journal.StateIndeterminate, opB: journal.StateDispatchPending} {
		if r, err := owner.Record(ctx, op); err != nil || r.State != want {
			t.Fatalf("%s: %s, %v; want %s", op, r.State, err, want)
		}
	}
}

// TestSharedHandshakeRefusesStrangers: a connection that does not speak the protocol is dropped
// without executing anything.
func TestSharedHandshakeRefusesStrangers(t *testing.T) {
	f := newFixture(t)
	f.open(t, shared)
	conn, err := net.Dial("unix", f.path+".sock")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 16)
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("stranger got an answer: %q", buf[:n])
	}
}

// TestClosedSharedStore: operations after Close are unavailable, for owner and client alike.
func TestClosedSharedStore(t *testing.T) {
	f := newFixture(t)
	owner := f.open(t, shared)
	cli := f.open(t, shared)
	cli.Close()
	owner.Close()
	for name, s := range map[string]*Store{"owner": owner, "client": cli} {
		if _, err := s.Get(ctx, "", authority.IDPrefix+"x"); !errors.Is(err, authority.ErrStoreUnavailable) || !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after Close: %v", name, err)
		}
	}
}

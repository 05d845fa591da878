package boltstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// Child processes: the test binary re-executes itself with these variables set, and TestMain
// runs the named role instead of the tests.
const (
	envRole = "ACTGATE_BOLTSTORE_CHILD"
	envDir  = "ACTGATE_BOLTSTORE_DIR"
	envNow  = "ACTGATE_BOLTSTORE_NOW"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// raceResult is what a racing process reports.
type raceResult struct {
	Instance string
	Owner    bool
	Won      []string
	Lost     int
	Errors   []string
}

// race has `workers` goroutines each try to ConsumeAndPend every authority, in its own random
// order; exactly one attempt per authority may succeed.
func race(s *Store, auths []authority.Authority, workers int) raceResult {
	var (
		mu  sync.Mutex
		res = raceResult{Instance: s.Instance()}
		wg  sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			order := rand.Perm(len(auths))
			for _, i := range order {
				a := auths[i]
				_, rec, err := s.ConsumeAndPend(context.Background(), a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), []byte("receipt"))
				mu.Lock()
				switch {
				case err == nil && rec.AuthorityID == a.ID:
					res.Won = append(res.Won, a.ID)
				case errors.Is(err, authority.ErrConsumed):
					res.Lost++
				default:
					res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", a.ID, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Owner = s.Owner()
	return res
}

func runChild(role string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	dir := os.Getenv(envDir)
	now, err := time.Parse(time.RFC3339Nano, os.Getenv(envNow))
	if err != nil {
		return fail(err)
	}
	signer, err := authority.LoadKey(filepath.Join(dir, "authority.pem"))
	if err != nil {
		return fail(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "auths.json"))
	if err != nil {
		return fail(err)
	}
	var auths []authority.Authority
	if err := json.Unmarshal(raw, &auths); err != nil {
		return fail(err)
	}
	opts := Options{Verifier: signer.Verifier(), Now: func() time.Time { return now }, OpenTimeout: 20 * time.Second}
	in := bufio.NewScanner(os.Stdin)
	wait := func(want string) error {
		if !in.Scan() || in.Text() != want {
			return fmt.Errorf("expected %q on stdin, got %q (%v)", want, in.Text(), in.Err())
		}
		return nil
	}
	report := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Printf("%s\n", b)
	}

	switch role {
	case "race":
		opts.Shared = true
		s, err := Open(filepath.Join(dir, "actgate.db"), opts)
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		if err := wait("go"); err != nil {
			return fail(err)
		}
		report(race(s, auths, 32))
		_, _ = io.Copy(io.Discard, os.Stdin) // stay up (and keep serving, if owner) until told to go
		if err := s.Close(); err != nil {
			return fail(err)
		}
		return 0

	case "crash":
		s, err := Open(filepath.Join(dir, "actgate.db"), opts)
		if err != nil {
			return fail(err)
		}
		a := auths[0]
		op := journal.NewOperationID()
		if _, _, err := s.ConsumeAndPend(context.Background(), a.ID, a.Binding, pendingFor(a, op), nil); err != nil {
			return fail(err)
		}
		// Consumed and journaled; the upstream call would come next. The parent kills us here.
		fmt.Println("pended", op)
		select {}

	case "failover":
		opts.Shared = true
		s, err := Open(filepath.Join(dir, "actgate.db"), opts)
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready", s.Owner())
		half := len(auths) / 2
		if err := wait("first"); err != nil {
			return fail(err)
		}
		report(race(s, auths[:half], 4))
		if err := wait("second"); err != nil { // the parent, owner so far, has closed its store
			return fail(err)
		}
		report(race(s, auths[half:], 4))
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := s.Close(); err != nil {
			return fail(err)
		}
		return 0
	}
	return fail(fmt.Errorf("unknown role %q", role))
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startChild(t *testing.T, f *fixture, role string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envDir+"="+f.dir, envNow+"="+f.clock.Now().Format(time.RFC3339Nano))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	c.out.Buffer(make([]byte, 1<<20), 16<<20)
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

func (c *child) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("child %d ended without output: %v", c.cmd.Process.Pid, c.out.Err())
	}
	return c.out.Text()
}

func (c *child) send(t *testing.T, s string) {
	t.Helper()
	if _, err := fmt.Fprintln(c.stdin, s); err != nil {
		t.Fatal(err)
	}
}

func (c *child) result(t *testing.T) raceResult {
	t.Helper()
	var r raceResult
	if err := json.Unmarshal([]byte(c.line(t)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (c *child) finish(t *testing.T) {
	t.Helper()
	c.stdin.Close()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child %d: %v", c.cmd.Process.Pid, err)
	}
}

func (f *fixture) writeAuths(t *testing.T, auths []authority.Authority) {
	t.Helper()
	b, err := json.Marshal(auths)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "auths.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkConsumedOnce reads the store and asserts that every authority is CONSUMED by exactly the
// operation whose DISPATCH_PENDING record names it, written by the instance that reported the
// win.
func checkConsumedOnce(t *testing.T, s *Store, auths []authority.Authority, winner map[string]string) {
	t.Helper()
	for _, a := range auths {
		got, err := s.Get(ctx, "", a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != authority.StateConsumed {
			t.Fatalf("%s is %s after the race", a.ID, got.State)
		}
		rec, err := s.ByAuthority(ctx, a.ID)
		if err != nil {
			t.Fatalf("%s has no dispatch record: %v", a.ID, err)
		}
		if rec.OperationID != got.ConsumedBy || rec.State != journal.StateDispatchPending {
			t.Fatalf("%s consumed by %s but its record is %s in %s", a.ID, got.ConsumedBy, rec.OperationID, rec.State)
		}
		if want := winner[a.ID]; rec.Instance != want {
			t.Fatalf("%s: record written by %s, but %s reported the win", a.ID, rec.Instance, want)
		}
		if recs, err := s.ByAct(ctx, a.Binding.ActID); err != nil || len(recs) != 1 {
			t.Fatalf("%s: %d records for its act (%v), want 1", a.ID, len(recs), err)
		}
	}
}

func tally(t *testing.T, auths []authority.Authority, results ...raceResult) map[string]string {
	t.Helper()
	winner := map[string]string{}
	total := 0
	for _, r := range results {
		if len(r.Errors) > 0 {
			t.Fatalf("instance %s had %d errors other than ErrConsumed, first: %s", r.Instance, len(r.Errors), r.Errors[0])
		}
		for _, id := range r.Won {
			if prev, dup := winner[id]; dup {
				t.Fatalf("%s consumed twice: by %s and %s", id, prev, r.Instance)
			}
			winner[id] = r.Instance
		}
		total += len(r.Won)
	}
	if total != len(auths) || len(winner) != len(auths) {
		t.Fatalf("%d successful consumes of %d authorities", total, len(auths))
	}
	return winner
}

// raceSize is the number of authorities raced for: 1,000, 200 with -short.
func raceSize() int {
	if testing.Short() {
		return 200
	}
	return 1000
}

// TestConcurrentConsumersOneProcess: 64 goroutines race for 1,000 authorities; exactly 1,000
// consumes succeed, one per authority (tool-use-binding §22 T-C).
func TestConcurrentConsumersOneProcess(t *testing.T) {
	f := newFixture(t)
	s := f.open(t)
	auths := f.issueN(t, s, raceSize())
	res := race(s, auths, 64)
	winner := tally(t, auths, res)
	if res.Lost != 63*len(auths) {
		t.Fatalf("%d attempts refused as consumed, want %d", res.Lost, 63*len(auths))
	}
	checkConsumedOnce(t, s, auths, winner)
}

// TestConcurrentConsumersTwoProcesses: two OS processes with 32 goroutines each race for the
// same 1,000 authorities in one shared store file.
func TestConcurrentConsumersTwoProcesses(t *testing.T) {
	f := newFixture(t)
	s, err := Open(f.path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	auths := f.issueN(t, s, raceSize())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.writeAuths(t, auths)

	children := []*child{startChild(t, f, "race"), startChild(t, f, "race")}
	for _, c := range children {
		if got := c.line(t); got != "ready" {
			t.Fatalf("child said %q", got)
		}
	}
	for _, c := range children {
		c.send(t, "go")
	}
	results := []raceResult{children[0].result(t), children[1].result(t)}
	for _, c := range children {
		c.finish(t)
	}
	if results[0].Owner == results[1].Owner {
		t.Fatalf("owner flags %v and %v: exactly one process must own the file", results[0].Owner, results[1].Owner)
	}
	if results[0].Instance == results[1].Instance {
		t.Fatal("both processes report the same instance")
	}
	winner := tally(t, auths, results...)
	if lost := results[0].Lost + results[1].Lost; lost != 63*len(auths) {
		t.Fatalf("%d attempts refused as consumed, want %d", lost, 63*len(auths))
	}
	t.Logf("process wins: %d (owner=%v), %d (owner=%v)", len(results[0].Won), results[0].Owner, len(results[1].Won), results[1].Owner)

	s2 := f.open(t)
	checkConsumedOnce(t, s2, auths, winner)
}

// TestOwnerGoesAway: a client process keeps working after the owning process closes the file;
// it takes the file over.
func TestOwnerGoesAway(t *testing.T) {
	f := newFixture(t)
	owner := f.open(t, shared)
	auths := f.issueN(t, owner, 40)
	f.writeAuths(t, auths)
	if !owner.Owner() {
		t.Fatal("first opener is not the owner")
	}

	c := startChild(t, f, "failover")
	if got := c.line(t); got != "ready false" {
		t.Fatalf("child said %q, want to be a client", got)
	}
	c.send(t, "first")
	first := c.result(t)
	if first.Owner {
		t.Fatal("child owns the file while the parent holds it")
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	c.send(t, "second")
	second := c.result(t)
	if !second.Owner {
		t.Fatal("child did not take the file over")
	}
	winner := tally(t, auths, first, second)
	c.finish(t)

	s := f.open(t)
	checkConsumedOnce(t, s, auths, winner)
}

// TestCrashAfterConsumeBeforeInvoke is tool-use-binding §22 T-G: kill the host after consume and
// before invoke; on restart the act does not run again. The child process consumes and journals,
// then dies by SIGKILL; the restarted store holds the record INDETERMINATE and refuses the
// authority.
func TestCrashAfterConsumeBeforeInvoke(t *testing.T) {
	f := newFixture(t)
	s, err := Open(f.path, f.options())
	if err != nil {
		t.Fatal(err)
	}
	auths := f.issueN(t, s, 1)
	s.Close()
	f.writeAuths(t, auths)

	c := startChild(t, f, "crash")
	line := c.line(t)
	op, ok := strings.CutPrefix(line, "pended ")
	if !ok {
		t.Fatalf("child said %q", line)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()

	s2 := f.open(t)
	n, err := s2.RecoverOnStart(ctx)
	if err != nil || n != 1 {
		t.Fatalf("RecoverOnStart = %d, %v; want 1", n, err)
	}
	rec, err := s2.ByAuthority(ctx, auths[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.OperationID != op || rec.State != journal.StateIndeterminate || rec.Reason != journal.ReasonRecoveredOnStart {
		t.Fatalf("record after crash and restart: %+v", rec)
	}
	a := auths[0]
	if _, _, err := s2.ConsumeAndPend(ctx, a.ID, a.Binding, pendingFor(a, journal.NewOperationID()), nil); !errors.Is(err, authority.ErrConsumed) {
		t.Fatalf("retry after restart: %v, want ErrConsumed", err)
	}
}

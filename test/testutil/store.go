package testutil

import (
	"crypto/ed25519"
	"crypto/sha256"
	"path/filepath"
	"testing"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
)

// SeededStore opens a fresh embedded store (bbolt, in a test directory, closed at cleanup) and
// returns it with the Ed25519 authority signer its verifier trusts, derived from seed so that a
// test's keys are the same on every run.
func SeededStore(t testing.TB, seed string) (*boltstore.Store, *authority.Signer) {
	t.Helper()
	s := sha256.Sum256([]byte(seed))
	signer, err := authority.NewSigner(ed25519.NewKeyFromSeed(s[:]))
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "actgate.db"), boltstore.Options{Verifier: signer.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, signer
}

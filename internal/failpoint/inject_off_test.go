//go:build !failpoints || !unix

package failpoint

import "testing"

// Without the failpoints tag the environment is never read: a kill selected for every point
// leaves this process running and every call returns nil.
func TestInjectIsOffWithoutTag(t *testing.T) {
	if Enabled() {
		t.Fatal("Enabled in a build without the failpoints tag")
	}
	for _, p := range append(Points(), MomentPoints()...) {
		t.Setenv(EnvVar, string(p)+"=error")
		if err := Inject(p); err != nil {
			t.Fatalf("Inject(%s) = %v", p, err)
		}
		t.Setenv(EnvVar, string(p))
		if err := Inject(p); err != nil {
			t.Fatalf("Inject(%s) = %v", p, err)
		}
	}
}

package approval_test

import "testing"

// The users the API server maps the provider's alice and bob to ('oidc:' + email).
const (
	alice = "oidc:alice@example.com"
	bob   = "oidc:bob@example.com"
)

// must fails t on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package budget

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Key kinds (api/v1alpha1 BudgetKeyBy).
const (
	KeyAgent          = "Agent"
	KeyServiceAccount = "ServiceAccount"
	KeyNamespace      = "Namespace"
	KeyPolicy         = "Policy"
	KeyExpression     = "Expression"
)

// MaxKeyBytes bounds a key, whatever derived it.
const MaxKeyBytes = 256

// ErrKey marks a key that cannot be derived: the caller has no identity of the kind asked for,
// or the expression's result is empty, too long or not printable text.
var ErrKey = errors.New("budget: key")

// Caller is what a key is derived from.
type Caller struct {
	// Agent is the agent's identity (Kubernetes: the pod's service account user name;
	// standalone: the configured agent name).
	Agent string
	// ServiceAccount is "namespace/name" of the agent pod's service account; standalone, the
	// agent.
	ServiceAccount string
	// Namespace is the policy's namespace (standalone: the policy's metadata.namespace or
	// "default").
	Namespace string
	// Policy is the policy's name.
	Policy string
	// Expression is the result of the budget's key expression, when by is Expression.
	Expression string
}

// DeriveKey returns the key by names for the caller. Every key is printable UTF-8 of at most
// MaxKeyBytes: it is shown on `actgate budgets` and stored in ledger ids.
func DeriveKey(by string, c Caller) (string, error) {
	var k string
	switch by {
	case KeyAgent, "":
		k = c.Agent
	case KeyServiceAccount:
		k = c.ServiceAccount
		if k == "" {
			k = c.Agent
		}
	case KeyNamespace:
		k = c.Namespace
	case KeyPolicy:
		k = c.Namespace + "/" + c.Policy
	case KeyExpression:
		k = c.Expression
	default:
		return "", fmt.Errorf("%w: by %q is not Agent, ServiceAccount, Namespace, Policy or Expression", ErrKey, by)
	}
	if err := CheckKey(k); err != nil {
		return "", fmt.Errorf("%w (by %s)", err, by)
	}
	return k, nil
}

// CheckKey refuses an empty key, one over MaxKeyBytes, and one holding invalid UTF-8 or a
// control or format character.
func CheckKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%w: empty", ErrKey)
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes; the bound is %d", ErrKey, len(k), MaxKeyBytes)
	case !utf8.ValidString(k):
		return fmt.Errorf("%w: not UTF-8", ErrKey)
	}
	for _, r := range k {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("%w: holds the control or format character %U", ErrKey, r)
		}
	}
	return nil
}

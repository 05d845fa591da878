package v1alpha1_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/actgate/actgate/api/v1alpha1"
)

// TestBindingMomentCallsAreImmutable: spec.calls, the calls the options run as principals see
// them, are set when the BindingMoment is created or never: an update cannot add, change or
// remove them.
func TestBindingMomentCallsAreImmutable(t *testing.T) {
	e := apiServer(t)
	ns := e.Namespace(t)
	ctx := ctxFor(t)
	call := v1alpha1.BindingMomentCall{Server: "payments", Tool: "send_payment", Args: `{"amount":9999,"to":"mallory-offshore-account"}`}

	without := sampleBindingMoment(t)
	without.Namespace = ns
	if err := e.Client.Create(ctx, without); err != nil {
		t.Fatal(err)
	}
	cur := &v1alpha1.BindingMoment{}
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(without), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Calls = []v1alpha1.BindingMomentCall{call, call}
	wantInvalid(t, e.Client.Update(ctx, cur), "calls are immutable")

	with := sampleBindingMoment(t)
	with.Namespace, with.Name = ns, with.Name+"-calls"
	with.Spec.Calls = []v1alpha1.BindingMomentCall{call, call}
	if err := e.Client.Create(ctx, with); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*v1alpha1.BindingMomentSpec){
		"changed": func(s *v1alpha1.BindingMomentSpec) { s.Calls[0].Args = `{"amount":10,"to":"bob"}` },
		"removed": func(s *v1alpha1.BindingMomentSpec) { s.Calls = nil },
	} {
		t.Run(name, func(t *testing.T) {
			cur := &v1alpha1.BindingMoment{}
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(with), cur); err != nil {
				t.Fatal(err)
			}
			mutate(&cur.Spec)
			wantInvalid(t, e.Client.Update(ctx, cur), "calls are immutable")
		})
	}
	tooMany := sampleBindingMoment(t)
	tooMany.Namespace, tooMany.Name = ns, tooMany.Name+"-five"
	tooMany.Spec.Calls = []v1alpha1.BindingMomentCall{call, call, call, call, call}
	wantInvalid(t, e.Client.Create(ctx, tooMany), "must have at most 4 items")
}

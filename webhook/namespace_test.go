package webhook

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/actgate/actgate/webhook/inject"
)

func TestNamespaceGuard(t *testing.T) {
	g := &NamespaceGuard{AdminGroups: []string{"system:masters", "platform-admins"}, AdminUsers: []string{"system:serviceaccount:flux-system:kustomize-controller"}}
	label := func(v string) map[string]string {
		if v == "<none>" {
			return nil
		}
		return map[string]string{inject.LabelInject: v, "team": "payments"}
	}
	for _, tc := range []struct {
		name     string
		old, new string // label values; "<none>" = absent; old "" = create
		user     string
		groups   []string
		allowed  bool
	}{
		{"anyone opts a namespace in", "<none>", "true", "dev", nil, true},
		{"anyone creates a governed namespace", "", "true", "dev", nil, true},
		{"anyone creates an unlabelled namespace", "", "<none>", "dev", nil, true},
		{"a developer cannot create an opted-out namespace", "", "false", "dev", nil, false},
		{"a developer cannot set false", "true", "false", "dev", []string{"developers"}, false},
		{"a developer cannot remove true", "true", "<none>", "dev", nil, false},
		{"a developer cannot set an invalid value", "true", "yes", "dev", nil, false},
		{"a developer cannot set false on an unlabelled namespace", "<none>", "false", "dev", nil, false},
		{"a developer cannot remove false", "false", "<none>", "dev", nil, false},
		{"unchanged label, other labels edited", "false", "false", "dev", nil, true},
		{"an admin group may set false", "true", "false", "root", []string{"platform-admins"}, true},
		{"system:masters may remove true", "true", "<none>", "root", []string{"system:masters"}, true},
		{"an admin user may set false", "true", "false", "system:serviceaccount:flux-system:kustomize-controller", nil, true},
		{"an admin may create an opted-out namespace", "", "false", "root", []string{"system:masters"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := asUser(tc.user, "", tc.groups...)
			nw := namespaceObj("agents", label(tc.new))
			var err error
			if tc.old == "" {
				_, err = g.ValidateCreate(ctx, nw)
			} else {
				_, err = g.ValidateUpdate(ctx, namespaceObj("agents", label(tc.old)), nw)
			}
			if tc.allowed && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.allowed && !errors.Is(err, ErrNamespaceGuarded) {
				t.Fatalf("err = %v, want ErrNamespaceGuarded", err)
			}
		})
	}
	if _, err := g.ValidateDelete(asUser("dev", ""), &corev1.Namespace{}); err != nil {
		t.Errorf("delete: %v", err)
	}
}

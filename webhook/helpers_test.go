package webhook

import (
	"context"
	"os"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
)

func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// reader is a fake client used only as a reader of fixed objects (never for writes or
// resourceVersion behaviour, which only a real API server shows).
func reader(t testing.TB, objs ...client.Object) client.Reader {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
}

// asUser is a context carrying an admission request from user (in groups) on subresource.
func asUser(user string, subresource string, groups ...string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo:    authenticationv1.UserInfo{Username: user, Groups: groups},
		SubResource: subresource,
	}})
}

// asUserWithExtra is asUser with userInfo.extra, as the API server's authenticator (or
// impersonation) sets it.
func asUserWithExtra(user string, extra map[string]authenticationv1.ExtraValue) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo: authenticationv1.UserInfo{Username: user, Extra: extra},
	}})
}

func sampleMoment(t testing.TB) *v1alpha1.BindingMoment {
	t.Helper()
	b, err := os.ReadFile("testdata/bindingmoment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bm := &v1alpha1.BindingMoment{}
	if err := yaml.UnmarshalStrict(b, bm); err != nil {
		t.Fatal(err)
	}
	bm.Namespace = "billing"
	return bm
}

func namespaceObj(name string, labels map[string]string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	ns.Name, ns.Labels = name, labels
	return ns
}

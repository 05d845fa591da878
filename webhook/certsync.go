package webhook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// CA file the certificate Secret's ca.crt is written to in Server.CertDir (CertSourceSecret);
// the chart's authority.caFile names it.
const caFileName = "ca.crt"

// secretSync keeps Server.CertDir a copy of the certificate Secret (CertSourceSecret): it
// watches that one Secret through the API (a field selector on its name, so one Secret's
// get/list/watch is all it needs) and writes its serving pair and CA certificate into the
// folder as soon as they change. The manager is then ready within moments of the rotator (or
// cert-manager) filling the Secret, where a Secret volume shows the new data only on the
// kubelet's next sync (12-90 s). The CA's private key (ca.key) is never written: it stays in
// the Secret, read by the rotator alone.
type secretSync struct {
	client          kubernetes.Interface
	namespace, name string
	// files maps a key of the Secret to the file name it is written to, in write order: the
	// private key before its certificate, so a reader that sees a new certificate finds its
	// key (certLoader keeps the last good pair across a mismatch).
	files [][2]string
	dir   string
	log   logr.Logger

	mu sync.Mutex
}

func newSecretSync(client kubernetes.Interface, cfg Config, log logr.Logger) *secretSync {
	return &secretSync{
		client: client, namespace: cfg.Certs.Namespace, name: cfg.Certs.SecretName, dir: cfg.Server.CertDir, log: log,
		files: [][2]string{{"tls.key", cfg.Server.KeyName}, {"tls.crt", cfg.Server.CertName}, {"ca.crt", caFileName}},
	}
}

// NeedLeaderElection is false: every replica serves webhooks with its own copy.
func (s *secretSync) NeedLeaderElection() bool { return false }

// Start watches the Secret until ctx ends. The informer relists every 10 minutes, so a file
// removed or changed under the manager is put back.
func (s *secretSync) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 10*time.Minute,
		informers.WithNamespace(s.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.name).String()
		}))
	inf := factory.Core().V1().Secrets().Informer()
	on := func(obj any) {
		if sec, ok := obj.(*corev1.Secret); ok && sec.Name == s.name {
			if err := s.write(sec); err != nil {
				s.log.Error(err, "writing the webhook certificate files", "secret", s.namespace+"/"+s.name, "dir", s.dir)
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, obj any) { on(obj) },
	}); err != nil {
		return fmt.Errorf("webhook: certificate Secret watch: %w", err)
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// write copies the Secret's keys into the folder; a key that is absent or empty (the Secret the
// chart creates empty, before the rotator fills it) leaves its file as it is, and a file whose
// content is unchanged is not rewritten (its modification time is what certLoader watches).
func (s *secretSync) write(sec *corev1.Secret) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, kf := range s.files {
		data := sec.Data[kf[0]]
		if len(data) == 0 {
			continue
		}
		path := filepath.Join(s.dir, kf[1])
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := writeFileAtomic(path, data); err != nil {
			return err
		}
		s.log.Info("wrote webhook certificate file", "file", path, "resourceVersion", sec.ResourceVersion)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file in path's folder and renames it over path,
// so a reader sees the old content or the new, never part of it.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

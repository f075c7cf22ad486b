package install

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/instancemgr/instance-manager/app"
)

// The kubelet's part for the replica StartManager runs, and its network.

// probe returns nil when GET http://addr/path answers 200.
func probe(addr, path string) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 at the time of
// the call.
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// writeToken writes a fresh token of the ServiceAccount namespace/name to
// path (atomically: the client may be reading it), owned by owner with
// mode 0600, as the kubelet writes a projected token for a pod that runs as
// a given user.
func writeToken(ctx context.Context, admin kubernetes.Interface, namespace, name, path string, owner fileOwner) error {
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return owner.write(path, []byte(tr.Status.Token), 0o600)
}

// renewToken writes a new token every half lifetime until ctx ends (the
// client re-reads the file; errors are retried a minute later).
func renewToken(ctx context.Context, admin kubernetes.Interface, namespace, name, path string, owner fileOwner) {
	wait := tokenLifetime / 2
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = tokenLifetime / 2
		if err := writeToken(ctx, admin, namespace, name, path, owner); err != nil && ctx.Err() == nil {
			ctrl.Log.WithName("install").Error(err, "renewing the ServiceAccount token; retrying in a minute")
			wait = time.Minute
		}
	}
}

// projectSecret copies the keys of the Secret into dir, each as a file,
// whenever they change, until ctx ends: the kubelet's Secret volume (mode
// 0644, its default, owned by owner).
func projectSecret(ctx context.Context, admin kubernetes.Interface, key types.NamespacedName, dir string, owner fileOwner) {
	written := map[string][]byte{}
	for {
		s, err := admin.CoreV1().Secrets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err == nil {
			for name, data := range s.Data {
				if len(data) == 0 || bytes.Equal(written[name], data) {
					continue
				}
				if err := owner.write(filepath.Join(dir, name), data, 0o644); err != nil {
					ctrl.Log.WithName("install").Error(err, "projecting the webhook certificate Secret", "key", name)
					continue
				}
				written[name] = data
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// fileOwner owns the files written for the replica: the image's user.
type fileOwner struct{ uid, gid int }

// write writes data to path atomically (the replica may be reading it),
// with mode and owner.
func (o fileOwner) write(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // not narrowed by the umask
		return err
	}
	if err := os.Chown(tmp, o.uid, o.gid); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// tailBuffer keeps the last 8 KiB written to it: the end of the
// replica's log, for errors.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 8 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > tailSize {
		b.buf = b.buf[len(b.buf)-tailSize:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// routeWebhooks points the release's webhooks at the replica: the webhook
// Service becomes an ExternalName Service for 127.0.0.1 and every webhook
// referring to it calls port port.
func routeWebhooks(ctx context.Context, admin kubernetes.Interface, namespace string, opts app.Options, port int) error {
	patch := []byte(`{"spec":{"type":"ExternalName","externalName":"127.0.0.1","clusterIP":null,"clusterIPs":null,"ipFamilies":null,"ipFamilyPolicy":null}}`)
	if _, err := admin.CoreV1().Services(namespace).Patch(ctx, opts.WebhookServiceName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("making the webhook Service %s/%s an ExternalName Service for 127.0.0.1: %w", namespace, opts.WebhookServiceName, err)
	}
	ours := func(s *admissionregistrationv1.ServiceReference) bool {
		return s != nil && s.Namespace == namespace && s.Name == opts.WebhookServiceName
	}
	mutating, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, opts.MutatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting MutatingWebhookConfiguration %s: %w", opts.MutatingWebhookConfiguration, err)
	}
	n := 0
	for i := range mutating.Webhooks {
		if s := mutating.Webhooks[i].ClientConfig.Service; ours(s) {
			s.Port = ptr.To(int32(port))
			n++
		}
	}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, mutating, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pointing MutatingWebhookConfiguration %s at port %d: %w", mutating.Name, port, err)
	}
	validating, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, opts.ValidatingWebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting ValidatingWebhookConfiguration %s: %w", opts.ValidatingWebhookConfiguration, err)
	}
	for i := range validating.Webhooks {
		if s := validating.Webhooks[i].ClientConfig.Service; ours(s) {
			s.Port = ptr.To(int32(port))
			n++
		}
	}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, validating, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("pointing ValidatingWebhookConfiguration %s at port %d: %w", validating.Name, port, err)
	}
	if n == 0 {
		return fmt.Errorf("no webhook of %s or %s calls Service %s/%s", opts.MutatingWebhookConfiguration, opts.ValidatingWebhookConfiguration, namespace, opts.WebhookServiceName)
	}
	return nil
}

package chaos

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// admissionStream is a tenant sending admission requests without pause:
// a dry-run create of a new group and a dry-run update of an existing
// one's labels, in turn, every 50ms. A request that fails for any reason
// but an update conflict (the controller wrote the group in between: the
// tenant re-reads it, as kubectl apply does) is a failed admission.
type admissionStream struct {
	sent, failed, conflicts atomic.Int64

	mu       sync.Mutex
	failures []string

	stop chan struct{}
	done chan struct{}
}

func startAdmissionStream(tenant client.Client, namespace, existing string) *admissionStream {
	s := &admissionStream{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var err error
			what := ""
			if i%2 == 0 {
				what = "dry-run create"
				err = tenant.Create(ctx, shortGroup(namespace, "probe-"+strconv.Itoa(i), "t3.medium"), client.DryRunAll)
			} else {
				what = "dry-run update of " + existing
				ig := &v1alpha1.InstanceGroup{}
				if err = tenant.Get(ctx, client.ObjectKey{Namespace: namespace, Name: existing}, ig); err == nil {
					ig.Spec.EKS.Configuration.Labels["probe"] = strconv.Itoa(i)
					err = tenant.Update(ctx, ig, client.DryRunAll)
				}
				if apierrors.IsConflict(err) {
					s.conflicts.Add(1)
					continue
				}
			}
			s.sent.Add(1)
			if err != nil {
				s.failed.Add(1)
				s.mu.Lock()
				s.failures = append(s.failures, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), what, err))
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// finish stops the stream and returns the failures.
func (s *admissionStream) finish() []string {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

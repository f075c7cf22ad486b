package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
type streamFailure struct {
	at  time.Time
	msg string
	err error
}

type admissionStream struct {
	sent, failed, conflicts atomic.Int64

	mu       sync.Mutex
	failures []streamFailure
	kills    []time.Time

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
				now := time.Now()
				s.mu.Lock()
				s.failures = append(s.failures, streamFailure{at: now, err: err,
					msg: fmt.Sprintf("%s %s: %v", now.Format("15:04:05.000"), what, err)})
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// killed records that a replica was killed at t.
func (s *admissionStream) killed(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kills = append(s.kills, t)
}

// lostWithKill is how close to a kill a request whose connection the
// killed replica dropped may fail: the request was in flight on it, or
// the API server sent it on a kept-alive connection to it before it saw
// the connection close.
const lostWithKill = 2 * time.Second

// finish stops the stream and returns the failed requests in two lists:
// lost, those whose connection was cut (EOF, reset) within lostWithKill of
// a kill, which a layer-4 Service cannot save (the API server does not
// retry an admission call); and failed, every other failure.
func (s *admissionStream) finish() (failed, lost []string) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.failures {
		if s.cutByKill(f) {
			lost = append(lost, f.msg)
		} else {
			failed = append(failed, f.msg)
		}
	}
	return failed, lost
}

func (s *admissionStream) cutByKill(f streamFailure) bool {
	msg := f.err.Error()
	if !strings.Contains(msg, ": EOF") && !strings.Contains(msg, "connection reset by peer") {
		return false
	}
	for _, k := range s.kills {
		if d := f.at.Sub(k); d > -lostWithKill && d < lostWithKill {
			return true
		}
	}
	return false
}

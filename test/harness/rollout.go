package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// RolloutRecordKey is the rollout record ConfigMap, beside the boundary
// ConfigMap.
var RolloutRecordKey = types.NamespacedName{Namespace: ConfigNamespace, Name: app.RolloutRecordName}

// RolloutRecord reads and decodes the rollout record; an error when it
// cannot be read or holds no record.
func RolloutRecord(ctx context.Context, c client.Client) (*record.Record, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, RolloutRecordKey, cm); err != nil {
		return nil, fmt.Errorf("reading the rollout record: %w", err)
	}
	rec, _, err := record.Decode(cm.Data)
	if err != nil {
		return nil, fmt.Errorf("decoding the rollout record: %w", err)
	}
	if rec == nil {
		return nil, fmt.Errorf("the rollout record holds no status: %v", cm.Data)
	}
	return rec, nil
}

// WaitRolloutRecord waits until the record rolls out revision target in
// phase (record.PhaseComplete, PhaseHalted, ...) and returns it; t fails
// after timeout with the target, phase and message seen last.
func WaitRolloutRecord(t testing.TB, c client.Client, target, phase string, timeout time.Duration) *record.Record {
	t.Helper()
	var rec *record.Record
	NewWithT(t).Eventually(func() string {
		r, err := RolloutRecord(context.Background(), c)
		if err != nil {
			return err.Error()
		}
		rec = r
		if rec.Target == target && rec.Phase == phase {
			return phase
		}
		return fmt.Sprintf("target %s phase %s: %s", rec.Target, rec.Phase, rec.Message)
	}, timeout, 500*time.Millisecond).Should(Equal(phase))
	return rec
}

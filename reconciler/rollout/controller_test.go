package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/boundaries/record"
)

// A record that cannot be written raises a Warning Event on the boundary
// ConfigMap once per distinct failure, and a Normal one when a write
// succeeds again.
func TestRecordNotWrittenIsReported(t *testing.T) {
	boundary := types.NamespacedName{Namespace: "instance-manager", Name: "instance-manager"}
	c := fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: boundary.Namespace, Name: boundary.Name}}).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: rec, ConfigMap: boundary,
		RecordName: types.NamespacedName{Namespace: "instance-manager", Name: "instance-manager-rollout"}}
	ctx := context.Background()
	tooLarge := fmt.Errorf("writing the rollout record: %w", &record.TooLargeError{Bytes: 1 << 21, Groups: 9000, Revisions: 5})
	for _, step := range []struct {
		err  error
		want string // the Event sent, "" for none
	}{
		{nil, ""},
		{tooLarge, "Warning RolloutRecordNotWritten The rollout cannot move: writing the rollout record: the rollout record would be 2097152 bytes"},
		{tooLarge, ""}, // the same failure, retried: no second Event
		{errors.New("etcdserver: request is too large"), "Warning RolloutRecordNotWritten The rollout cannot move: etcdserver: request is too large"},
		{nil, "Normal RolloutRecordWritten The rollout record instance-manager/instance-manager-rollout is written again"},
		{nil, ""},
	} {
		r.reportWrite(ctx, step.err)
		got := ""
		select {
		case got = <-rec.Events:
		default:
		}
		if step.want == "" && got != "" || !strings.HasPrefix(got, step.want) {
			t.Errorf("after %v: Event %q, want %q", step.err, got, step.want)
		}
	}
}

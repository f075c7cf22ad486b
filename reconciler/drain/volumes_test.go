package drain

import (
	"context"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/reconciler/drain/fakeeviction"
)

func attachment(name, node string, attached bool) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv-" + name)}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
}

// Review 2026-11-29 L9: a node whose pods are gone is Drained only once
// its volumes are detached (its VolumeAttachments gone), or past
// VolumeDetachWait; a node that is not Ready, or volumes of other nodes
// or not attached, are not waited for.
func TestDrainWaitsForVolumesToDetach(t *testing.T) {
	start := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		notReady bool
		later    time.Duration // the second step, after the first
		detach   bool          // the volume is detached between the steps
		first    DrainResult
		second   DrainResult
	}{
		{name: "attached: waits, then drained once detached", later: time.Minute, detach: true, first: Draining, second: Drained},
		{name: "attached: still waiting within the bound", later: time.Minute, first: Draining, second: Draining},
		{name: "attached past the bound: drained", later: VolumeDetachWait, first: Draining, second: Drained},
		{name: "node not Ready: not waited for", notReady: true, later: time.Second, first: Drained, second: Drained},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := start
			srv := fakeeviction.New(func() time.Time { return now }, nil,
				attachment("a", "n1", true), attachment("other-node", "n2", true), attachment("failed", "n1", false))
			d := &Drainer{Kube: srv.Kube, Timeout: time.Minute, Step: time.Second, Now: func() time.Time { return now }, retry: time.Millisecond}
			node := drainNode(now, time.Minute, !tc.notReady)
			node.UID = types.UID("n1-" + string(rune('a'+i)))
			got, msg, err := d.Drain(context.Background(), node)
			if err != nil || got != tc.first {
				t.Fatalf("first step: %v %q (%v), want %v", got, msg, err, tc.first)
			}
			if got == Draining && (!strings.Contains(msg, "1 volume(s) to detach: pv-a") || strings.Contains(msg, "other-node") || strings.Contains(msg, "failed")) {
				t.Errorf("first step says %q", msg)
			}
			now = now.Add(tc.later)
			if tc.detach {
				if err := srv.Kube.StorageV1().VolumeAttachments().Delete(context.Background(), "a", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if got, msg, err := d.Drain(context.Background(), node); err != nil || got != tc.second {
				t.Fatalf("second step: %v %q (%v), want %v", got, msg, err, tc.second)
			}
		})
	}
}

package drain

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// A drain is its owner's: a later Start takes it over only for an
// instance that goes anyway, and Release gives the node back only to the
// owner that started it (GiveBack: the runner's drain stopped first).
func TestDrainOwnership(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     Owner // "" : the node is not draining
		legacy    bool  // the first drain carries no owner annotation (older version)
		then      Owner
		wantOwner Owner
		release   []Owner
		released  bool
	}{
		{name: "a rotation cordons a schedulable node", then: OwnerRotation, wantOwner: OwnerRotation,
			release: []Owner{OwnerRotation, OwnerSurge}, released: true},
		{name: "an interruption takes over a rotation's drain", first: OwnerRotation, then: OwnerInterruption,
			wantOwner: OwnerInterruption, release: []Owner{OwnerRotation, OwnerSurge}},
		{name: "a termination takes over a surge give-back", first: OwnerSurge, then: OwnerTermination,
			wantOwner: OwnerTermination, release: []Owner{OwnerRotation, OwnerSurge}},
		{name: "a rotation never takes over an interruption", first: OwnerInterruption, then: OwnerRotation,
			wantOwner: OwnerInterruption, release: []Owner{OwnerRotation, OwnerSurge}},
		{name: "a termination leaves an interruption's drain the interruption's", first: OwnerInterruption, then: OwnerTermination,
			wantOwner: OwnerInterruption, release: []Owner{OwnerTermination}},
		{name: "the delete takes over a replacement's drain", first: OwnerRetire, then: OwnerDelete, wantOwner: OwnerDelete,
			release: []Owner{OwnerRetire}},
		{name: "the interruption releases its own", first: OwnerInterruption, then: OwnerInterruption,
			wantOwner: OwnerInterruption, release: []Owner{OwnerInterruption}, released: true},
		{name: "a drain from before owners is the rotation's", first: OwnerRotation, legacy: true, then: OwnerRotation,
			wantOwner: OwnerRotation, release: []Owner{OwnerRotation}, released: true},
		{name: "a legacy drain is taken over by a termination", first: OwnerRotation, legacy: true, then: OwnerTermination,
			wantOwner: OwnerTermination, release: []Owner{OwnerRotation, OwnerSurge}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(node).Build()
			d := &Drainer{Client: c, Timeout: time.Minute, Now: time.Now}
			get := func() *corev1.Node {
				got := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKey{Name: "n"}, got); err != nil {
					t.Fatal(err)
				}
				return got
			}
			if tc.first != "" {
				if err := d.Start(ctx, get(), tc.first); err != nil {
					t.Fatal(err)
				}
				if tc.legacy {
					n := get()
					delete(n.Annotations, AnnotationDrainOwner)
					if err := c.Update(ctx, n); err != nil {
						t.Fatal(err)
					}
				}
			}
			started := get().Annotations[AnnotationDrainStarted]
			if err := d.Start(ctx, get(), tc.then); err != nil {
				t.Fatal(err)
			}
			n := get()
			if got := OwnerOf(n); got != tc.wantOwner {
				t.Errorf("owner after Start(%s) = %q, want %q", tc.then, got, tc.wantOwner)
			}
			if started != "" && n.Annotations[AnnotationDrainStarted] != started {
				t.Errorf("drain start moved from %s to %s: a take-over keeps the first", started, n.Annotations[AnnotationDrainStarted])
			}
			if NeedsStart(n, tc.wantOwner) {
				t.Errorf("NeedsStart(%s) on its own cordoned node = true", tc.wantOwner)
			}
			// The node's drain queued in a runner: GiveBack stops it only
			// with the release.
			runner := &Drains{Max: 1, stepFn: func(context.Context, string) (DrainResult, string, error) { return Draining, "", nil }}
			group := types.NamespacedName{Namespace: "ns", Name: "g"}
			runner.Poll(ctx, group, nodeNamed("n"))
			released, err := GiveBack(ctx, runner, d, n, tc.release...)
			if err != nil {
				t.Fatal(err)
			}
			if stopped := len(runner.Draining(group)) == 0; stopped != tc.released {
				t.Errorf("GiveBack(%v): drain stopped in the runner %v, want %v", tc.release, stopped, tc.released)
			}
			n = get()
			if released != tc.released || n.Spec.Unschedulable == tc.released || Marked(n) == tc.released {
				t.Errorf("GiveBack(%v) = %v (unschedulable %v, annotations %v), want released %v", tc.release, released, n.Spec.Unschedulable, n.Annotations, tc.released)
			}
			if tc.released && (n.Annotations[AnnotationDrainOwner] != "" || !d.Skipped(n)) {
				t.Errorf("released node keeps its owner or is not skipped: %v", n.Annotations)
			}
		})
	}
}

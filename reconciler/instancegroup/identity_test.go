package instancegroup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots/fakeslots"
)

// witnessProvisioner reads the stored group (through the API) when its
// Apply, standing for the first cloud write, starts, and fails it as a
// cloud write that failed after creating something would; Delete records
// the group it was given.
type witnessProvisioner struct {
	c       client.Client
	applied []*v1alpha1.InstanceGroup // stored group at each Apply
	deleted []*v1alpha1.InstanceGroup // group handed to each Delete
}

func (p *witnessProvisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	stored := &v1alpha1.InstanceGroup{}
	if err := p.c.Get(ctx, client.ObjectKeyFromObject(ig), stored); err != nil {
		return nil, err
	}
	p.applied = append(p.applied, stored)
	return nil, errors.New("autoscaling PutWarmPool: ValidationError (after CreateAutoScalingGroup succeeded)")
}

func (p *witnessProvisioner) Delete(_ context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	p.deleted = append(p.deleted, ig.DeepCopy())
	return true, nil
}

func identityGroup(provisioner string) *v1alpha1.InstanceGroup {
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", Generation: 1, Finalizers: []string{Finalizer}},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: provisioner},
	}
	switch provisioner {
	case v1alpha1.ProvisionerEKSManaged:
		ig.Spec.EKSManaged = &v1alpha1.EKSManagedSpec{Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "prod"}}
	case v1alpha1.ProvisionerEKSFargate:
		ig.Spec.EKSFargate = &v1alpha1.EKSFargateSpec{ClusterName: "dev"}
	}
	return ig
}

func identityReconciler(c client.Client, provs map[string]providers.Provisioner) *Reconciler {
	return &Reconciler{
		Client: c, Provisioners: provs, Recorder: events.NewFakeRecorder(100), Slots: &fakeslots.Slots{Max: func() int { return 1 }},
		PollInterval: time.Second, ResyncInterval: time.Minute, backoff: newFailureBackoff(time.Second, time.Minute),
	}
}

// Attack 14 (N10) at the reconciler: the identity is stored before the
// first cloud write, even when every other status write of the pass loses
// (a tenant annotating the group in a loop) and the cloud write fails: the
// stored group then has status.identity and no status name, which is
// what the webhook refuses a switch on.
func TestIdentityIsRecordedBeforeTheFirstCloudWrite(t *testing.T) {
	ig := identityGroup(v1alpha1.ProvisionerEKSManaged)
	otherStatusWrites := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				data, _ := patch.Data(obj)
				if !strings.Contains(string(data), `"identity"`) {
					otherStatusWrites++ // the report or fail write: lost to a tenant's edit
					return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "instancegroups"}, obj.GetName(), nil)
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	prov := &witnessProvisioner{c: c}
	r := identityReconciler(c, map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: prov})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if len(prov.applied) != 1 {
		t.Fatalf("Apply ran %d times, want 1", len(prov.applied))
	}
	want := v1alpha1.GroupIdentity{Provisioner: v1alpha1.ProvisionerEKSManaged, ClusterName: "prod"}
	if got := prov.applied[0].Status.Identity; got == nil || *got != want {
		t.Fatalf("stored status.identity when the first cloud write began = %+v, want %+v", got, want)
	}
	if otherStatusWrites == 0 {
		t.Fatal("the failure's status write was never tried; the fault did not apply")
	}
	stored := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), req.NamespacedName, stored); err != nil {
		t.Fatal(err)
	}
	if stored.Status.Identity == nil || stored.Status.ActiveScalingGroupName != "" {
		t.Fatalf("stored status %+v: want the identity recorded and no status name (the report never landed)", stored.Status)
	}
	// The next pass does not record again.
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("second reconcile: %v", err)
	}
	if len(prov.applied) != 2 || *prov.applied[1].Status.Identity != want {
		t.Fatalf("second pass: Apply ran %d times; identity %+v", len(prov.applied), prov.applied[len(prov.applied)-1].Status.Identity)
	}
}

// A record that cannot be stored stops the pass before any cloud write.
func TestNoCloudWriteWithoutTheIdentityRecord(t *testing.T) {
	for name, fault := range map[string]error{
		"server error": apierrors.NewInternalError(errors.New("etcd is down")),
		"conflicts":    apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "instancegroups"}, "web", nil),
	} {
		t.Run(name, func(t *testing.T) {
			ig := identityGroup(v1alpha1.ProvisionerEKSManaged)
			c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).
				WithInterceptorFuncs(interceptor.Funcs{
					SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
						if data, _ := patch.Data(obj); strings.Contains(string(data), `"identity"`) {
							return fault
						}
						return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
					},
				}).Build()
			prov := &witnessProvisioner{c: c}
			r := identityReconciler(c, map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: prov})
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)})
			if err != nil {
				t.Fatalf("reconcile returned %v (want a requeue)", err)
			}
			if len(prov.applied) != 0 {
				t.Fatal("Apply ran without the identity stored")
			}
			if res.RequeueAfter == 0 {
				t.Fatal("no retry scheduled")
			}
		})
	}
}

// A spec that left the recorded identity (a write that bypassed the
// webhook) builds nothing and says so; its deletion deletes through the
// recorded identity, with the provisioner that built it.
func TestRecordedIdentityGovernsBuildAndDeletion(t *testing.T) {
	ig := identityGroup(v1alpha1.ProvisionerEKSFargate) // spec: eks-fargate in "dev"
	ig.Status.Identity = &v1alpha1.GroupIdentity{Provisioner: v1alpha1.ProvisionerEKSManaged, ClusterName: "prod"}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ig).WithStatusSubresource(&v1alpha1.InstanceGroup{}).Build()
	managed, fargate := &witnessProvisioner{c: c}, &witnessProvisioner{c: c}
	r := identityReconciler(c, map[string]providers.Provisioner{v1alpha1.ProvisionerEKSManaged: managed, v1alpha1.ProvisionerEKSFargate: fargate})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ig)}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(managed.applied)+len(fargate.applied) != 0 {
		t.Fatal("a spec off its recorded identity was built")
	}
	stored := &v1alpha1.InstanceGroup{}
	if err := c.Get(context.Background(), req.NamespacedName, stored); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(stored.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != ReasonIdentityChanged || !strings.Contains(ready.Message, `spec.provisioner is "eks-fargate" but status.identity records`) {
		t.Fatalf("Ready condition = %+v", ready)
	}

	if err := c.Delete(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(fargate.deleted) != 0 || len(managed.deleted) != 1 {
		t.Fatalf("deletes: eks-managed %d, eks-fargate %d; want the recorded provisioner's only", len(managed.deleted), len(fargate.deleted))
	}
	if got := v1alpha1.SpecIdentity(&managed.deleted[0].Spec); got != *ig.Status.Identity {
		t.Fatalf("Delete was given identity %+v, want the recorded %+v", got, *ig.Status.Identity)
	}
}

func TestIdentityToRecord(t *testing.T) {
	eks := func(cluster string) v1alpha1.InstanceGroupSpec {
		return v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS, EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: cluster}}}
	}
	switched := eks("prod")
	switched.Provisioner = v1alpha1.ProvisionerEKSFargate
	cf := eks("prod")
	cf.Provisioner = v1alpha1.ProvisionerEKSCF
	cases := []struct {
		name   string
		spec   v1alpha1.InstanceGroupSpec
		status v1alpha1.InstanceGroupStatus
		want   v1alpha1.GroupIdentity
	}{
		{"new group: the spec", eks("prod"), v1alpha1.InstanceGroupStatus{}, v1alpha1.GroupIdentity{Provisioner: "eks", ClusterName: "prod"}},
		{"eks-cf is recorded as eks", cf, v1alpha1.InstanceGroupStatus{}, v1alpha1.GroupIdentity{Provisioner: "eks", ClusterName: "prod"}},
		{"backfill: built as the spec says", eks("prod"), v1alpha1.InstanceGroupStatus{Provisioner: "eks", ActiveScalingGroupName: "asg"}, v1alpha1.GroupIdentity{Provisioner: "eks", ClusterName: "prod"}},
		{"backfill: switched while the old webhook missed it", switched, v1alpha1.InstanceGroupStatus{Provisioner: "eks", ActiveScalingGroupName: "asg"}, v1alpha1.GroupIdentity{Provisioner: "eks", ClusterName: "prod"}},
		{"status provisioner without names: nothing built", switched, v1alpha1.InstanceGroupStatus{Provisioner: "eks"}, v1alpha1.GroupIdentity{Provisioner: "eks-fargate"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := identityToRecord(&v1alpha1.InstanceGroup{Spec: c.spec, Status: c.status})
			if got != c.want {
				t.Fatalf("identityToRecord = %+v, want %+v", got, c.want)
			}
		})
	}
}

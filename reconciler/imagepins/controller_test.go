package imagepins

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// cloud is a fake EKS and SSM that keeps values and counts calls.
type cloud struct {
	versions map[string]string
	params   map[string]string
	fail     error // answered by GetParameter while set
	calls    int
}

func (c *cloud) DescribeCluster(_ context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	c.calls++
	v, ok := c.versions[awssdk.ToString(in.Name)]
	if !ok {
		return nil, &ekstypes.ResourceNotFoundException{Message: awssdk.String("no cluster")}
	}
	return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{Name: in.Name, Version: awssdk.String(v)}}, nil
}

func (c *cloud) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	c.calls++
	if c.fail != nil {
		return nil, c.fail
	}
	v, ok := c.params[awssdk.ToString(in.Name)]
	if !ok {
		return nil, &ssmtypes.ParameterNotFound{}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: awssdk.String(v)}}, nil
}

const al2 = "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id"

func group(ns, name, image string) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: "eks", EKS: &v1alpha1.EKSSpec{
			Configuration: &v1alpha1.EKSConfiguration{ClusterName: "prod", Image: image}}}}
}

type rig struct {
	t     *testing.T
	r     *Reconciler
	c     client.Client
	cloud *cloud
	now   time.Time
	rec   *events.FakeRecorder
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	boundary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "im", Name: "boundaries"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(append(objs, boundary)...).Build()
	st := &store.Store{}
	cfg, err := boundaries.Parse(map[string]string{"excludedNamespaces": "- kube-system\n"})
	if err != nil {
		t.Fatal(err)
	}
	st.SetData(cfg, "1", map[string]string{}, "rev")
	g := &rig{t: t, c: c, now: time.Unix(1e9, 0), rec: events.NewFakeRecorder(20),
		cloud: &cloud{versions: map[string]string{"prod": "1.30"}, params: map[string]string{al2: "ami-al2-v1", "/platform/base": "ami-base-v1"}}}
	g.r = &Reconciler{Client: c, Record: c, RecordName: types.NamespacedName{Namespace: "im", Name: "boundaries-rollout"},
		ConfigMap: types.NamespacedName{Namespace: "im", Name: "boundaries"}, Store: st, EKS: g.cloud, SSM: g.cloud,
		Recorder: g.rec, Period: time.Minute, Now: func() time.Time { return g.now }}
	return g
}

func (g *rig) reconcile() (ctrl.Result, error) {
	g.t.Helper()
	return g.r.Reconcile(context.Background(), ctrl.Request{})
}

// pins is the record's pins key ("" when none or no record).
func (g *rig) pins() string {
	cm := &corev1.ConfigMap{}
	if err := g.c.Get(context.Background(), g.r.RecordName, cm); err != nil {
		return ""
	}
	return cm.Data[boundaries.KeyPins]
}

func (g *rig) event() string {
	select {
	case e := <-g.rec.Events:
		return e
	default:
		return ""
	}
}

func TestPinsFollowWhatGroupsUseAndWhatAWSPublishes(t *testing.T) {
	g := newRig(t)
	if _, err := g.reconcile(); err != nil || g.cloud.calls != 0 || g.pins() != "" {
		t.Fatalf("no group uses a reference: err %v, %d calls, pins %q", err, g.cloud.calls, g.pins())
	}

	for _, ig := range []*v1alpha1.InstanceGroup{group("team-a", "latest", "latest"), group("team-b", "base", "ssm:///platform/base"),
		group("team-c", "ami", "ami-0123"), group("kube-system", "excluded", "ssm:///platform/other")} {
		if err := g.c.Create(context.Background(), ig); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.reconcile(); err != nil {
		t.Fatal(err)
	}
	want := `{"clusterVersions":{"prod":"1.30"},"images":{"/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id":"ami-al2-v1","/platform/base":"ami-base-v1"}}`
	if g.pins() != want || g.cloud.calls != 3 {
		t.Fatalf("pins %s after %d calls; want %s after 3 (one DescribeCluster, two GetParameter; the excluded namespace's reference is not pinned)", g.pins(), g.cloud.calls, want)
	}
	if e := g.event(); !strings.Contains(e, ReasonPinsAdded) {
		t.Errorf("event %q", e)
	}

	// Within the period nothing is asked again.
	g.now = g.now.Add(30 * time.Second)
	if res, err := g.reconcile(); err != nil || g.cloud.calls != 3 || res.RequeueAfter != 30*time.Second {
		t.Fatalf("within the period: %v, %d calls, requeue %v", err, g.cloud.calls, res.RequeueAfter)
	}

	// AWS publishes another AMI: after the period, a new value.
	g.cloud.params["/platform/base"] = "ami-base-v2"
	g.now = g.now.Add(time.Minute)
	if _, err := g.reconcile(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.pins(), `"/platform/base":"ami-base-v2"`) {
		t.Errorf("pins %s", g.pins())
	}
	if e := g.event(); !strings.Contains(e, ReasonPinsChanged) || !strings.Contains(e, "pins.images[/platform/base]: ami-base-v1 -> ami-base-v2") {
		t.Errorf("event %q", e)
	}

	// A control-plane upgrade: "latest" resolves for 1.31.
	g.cloud.versions["prod"] = "1.31"
	al2v31 := strings.Replace(al2, "1.30", "1.31", 1)
	g.cloud.params[al2v31] = "ami-al2-131"
	g.now = g.now.Add(time.Minute)
	if _, err := g.reconcile(); err != nil {
		t.Fatal(err)
	}
	if p := g.pins(); !strings.Contains(p, `"prod":"1.31"`) || !strings.Contains(p, al2v31+`":"ami-al2-131"`) || strings.Contains(p, al2+`"`) {
		t.Errorf("after the upgrade, pins %s", p)
	}
	if e := g.event(); !strings.Contains(e, "pins.clusterVersions[prod]: 1.30 -> 1.31") {
		t.Errorf("event %q", e)
	}

	// A failing lookup keeps the values in force and backs off.
	before := g.pins()
	g.cloud.fail = errors.New("ThrottlingException: Rate exceeded")
	g.now = g.now.Add(time.Minute)
	if _, err := g.reconcile(); err == nil || !strings.Contains(err.Error(), "Rate exceeded") {
		t.Errorf("a failed lookup: %v", err)
	}
	if g.pins() != before {
		t.Errorf("a failed lookup changed the pins: %s, was %s", g.pins(), before)
	}
	if e := g.event(); !strings.Contains(e, ReasonResolveFailed) {
		t.Errorf("event %q", e)
	}
	g.cloud.fail = nil

	// When no group uses a reference any more, the pins go.
	igs := &v1alpha1.InstanceGroupList{}
	if err := g.c.List(context.Background(), igs); err != nil {
		t.Fatal(err)
	}
	for i := range igs.Items {
		if err := g.c.Delete(context.Background(), &igs.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	calls := g.cloud.calls
	if _, err := g.reconcile(); err != nil {
		t.Fatal(err)
	}
	if g.pins() != "" || g.cloud.calls != calls {
		t.Errorf("no group left: pins %q, %d calls", g.pins(), g.cloud.calls-calls)
	}
}

func TestAReferenceNoLongerUsedStaysPinnedUntilTheNextChange(t *testing.T) {
	old := &boundaries.Pins{Images: map[string]string{"/a": "ami-1", "/b": "ami-2"}}
	if d := decide(old, &boundaries.Pins{Images: map[string]string{"/a": "ami-1"}}); d.write {
		t.Errorf("dropping /b alone is written: %+v", d)
	}
	if d := decide(old, &boundaries.Pins{Images: map[string]string{"/a": "ami-3"}}); !d.write || d.kind != changeValues {
		t.Errorf("a changed value: %+v", d)
	}
	if d := decide(old, &boundaries.Pins{Images: map[string]string{"/a": "ami-1", "/b": "ami-2", "/c": "ami-4"}}); !d.write || d.kind != changeAdded {
		t.Errorf("an added reference: %+v", d)
	}
	if d := decide(old, nil); !d.write || d.kind != changeCleared {
		t.Errorf("nothing used: %+v", d)
	}
	if d := decide(nil, nil); d.write {
		t.Errorf("nothing before or after: %+v", d)
	}
}

func TestAParameterThatDoesNotExistIsNotPinned(t *testing.T) {
	g := newRig(t, group("team-a", "x", "ssm:///nope"))
	if _, err := g.reconcile(); err != nil {
		t.Fatal(err)
	}
	if g.pins() != "" {
		t.Errorf("pins %s", g.pins())
	}
}

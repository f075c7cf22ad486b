package providers

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Adopt retags and says so only what Adopter.Check hands over; a failed
// retag is an error naming the resource, and nothing is announced.
func TestAdopt(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	o := ownership.Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "new"}
	old := ownership.Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "old"}
	reader := fake.NewClientBuilder().WithScheme(s).WithObjects(&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "web", UID: "new"}}).Build()
	cases := []struct {
		name      string
		adopter   *ownership.Adopter
		tags      map[string]string
		retagErr  error
		adopted   bool
		foreign   bool
		errSubstr string
	}{
		{name: "already o's: nothing to do", adopter: &ownership.Adopter{Reader: reader}, tags: o.Tags()},
		{name: "left by an earlier self whose uid is gone: adopted", adopter: &ownership.Adopter{Reader: reader}, tags: old.Tags(), adopted: true},
		{name: "no adopter: foreign", adopter: nil, tags: old.Tags(), foreign: true},
		{name: "retag fails: an error naming the resource", adopter: &ownership.Adopter{Reader: reader}, tags: old.Tags(),
			retagErr: errors.New("AccessDenied"), errSubstr: `adopting EKS node group "ng" left by InstanceGroup acme/web's earlier uid old: AccessDenied`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var retagged map[string]string
			var events []string
			ctx := WithEvents(context.Background(), func(typ, reason, msg string) { events = append(events, typ+" "+reason+": "+msg) })
			adopted, err := Adopt(ctx, c.adopter, o, "EKS node group", "ng", c.tags, func(_ context.Context, tags map[string]string) error {
				retagged = tags
				return c.retagErr
			})
			switch {
			case c.foreign:
				if !ownership.IsForeign(err) || adopted || retagged != nil {
					t.Fatalf("Adopt = %v, %v (retagged %v); want foreign, untouched", adopted, err, retagged)
				}
			case c.errSubstr != "":
				if err == nil || !strings.Contains(err.Error(), c.errSubstr) || adopted || len(events) != 0 {
					t.Fatalf("Adopt = %v, %v, events %v; want an error containing %q and no Event", adopted, err, events, c.errSubstr)
				}
			case err != nil || adopted != c.adopted:
				t.Fatalf("Adopt = %v, %v; want adopted=%v", adopted, err, c.adopted)
			case c.adopted:
				if retagged[ownership.TagUID] != "new" || len(events) != 1 || !strings.HasPrefix(events[0], "Normal Adopted: Adopted EKS node group ng") {
					t.Fatalf("retagged %v, events %v; want the new uid written and one Adopted Event", retagged, events)
				}
			default:
				if retagged != nil || len(events) != 0 {
					t.Fatalf("retagged %v, events %v for a resource already o's", retagged, events)
				}
			}
		})
	}
}

// CollectAdoptions holds Adopted Events back and emits them as one; other
// Events pass through at once.
func TestCollectAdoptions(t *testing.T) {
	var events []string
	ctx := WithEvents(context.Background(), func(typ, reason, msg string) { events = append(events, reason+": "+msg) })
	ctx, flush := CollectAdoptions(ctx)
	Emit(ctx, "Normal", ReasonAdopted, "a")
	Emit(ctx, "Warning", ReasonRecreated, "r")
	Emit(ctx, "Normal", ReasonAdopted, "b")
	if len(events) != 1 || events[0] != ReasonRecreated+": r" {
		t.Fatalf("before flush: %v", events)
	}
	flush()
	if len(events) != 2 || events[1] != ReasonAdopted+": a; b" {
		t.Fatalf("after flush: %v", events)
	}
}

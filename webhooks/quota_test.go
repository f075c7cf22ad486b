package webhooks

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

func quotaGroup(ns, name string, created time.Time) v1alpha1.InstanceGroup {
	g := v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS, EKS: &v1alpha1.EKSSpec{MaxSize: 1,
			Configuration: &v1alpha1.EKSConfiguration{InstanceType: "m5.large"}}},
	}
	if !created.IsZero() {
		g.CreationTimestamp = metav1.NewTime(created)
	}
	return g
}

func TestCreatedBefore(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	all := []v1alpha1.InstanceGroup{
		quotaGroup("a", "first", t0), quotaGroup("a", "b-same-second", t0.Add(time.Second)),
		quotaGroup("a", "c-same-second", t0.Add(time.Second)), quotaGroup("a", "last", t0.Add(time.Minute)),
	}
	names := func(gs []v1alpha1.InstanceGroup) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.Name)
		}
		return out
	}
	for _, tc := range []struct {
		ig   v1alpha1.InstanceGroup
		want []string
	}{
		{all[0], nil},
		{all[1], []string{"first"}},
		{all[2], []string{"first", "b-same-second"}},
		{all[3], []string{"first", "b-same-second", "c-same-second"}},
		{quotaGroup("a", "not-created-yet", time.Time{}), []string{"first", "b-same-second", "c-same-second", "last"}},
	} {
		if got := names(CreatedBefore(&tc.ig, all)); !slices.Equal(got, tc.want) {
			t.Errorf("CreatedBefore(%s) = %v, want %v", tc.ig.Name, got, tc.want)
		}
	}
}

func TestQuotaProblems(t *testing.T) {
	excluding, err := boundaries.Parse(map[string]string{"excludedNamespaces": "[platform]"})
	if err != nil {
		t.Fatal(err)
	}
	var ten, fargates []v1alpha1.InstanceGroup
	for i := 0; i < 10; i++ {
		ten = append(ten, quotaGroup("team", fmt.Sprint("g", i), time.Time{}))
		f := quotaGroup(fmt.Sprint("ns", i), "f", time.Time{})
		f.Spec = v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSFargate, EKSFargate: &v1alpha1.EKSFargateSpec{ClusterName: "prod"}}
		fargates = append(fargates, f)
	}
	newFargate := quotaGroup("admin-ns", "f", time.Time{})
	newFargate.Spec = fargates[0].Spec
	for _, tc := range []struct {
		name   string
		cfg    *boundaries.Config
		ig     v1alpha1.InstanceGroup
		others []v1alpha1.InstanceGroup
		want   string
	}{
		{"default quotas without a ConfigMap", nil, quotaGroup("team", "new", time.Time{}), ten, "11 InstanceGroups in namespace team would be above quotas.perNamespace.maxGroups (10)"},
		{"an excluded namespace skips them", excluding, quotaGroup("platform", "new", time.Time{}), relabel(ten, "platform"), ""},
		{"the admin's namespace skips them", nil, quotaGroup("admin-ns", "new", time.Time{}), relabel(ten, "admin-ns"), ""},
		{"but not AWS's limits", nil, newFargate, fargates, `11 eks-fargate groups of cluster "prod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want != "" && len(QuotaProblems(tc.cfg, &tc.ig, tc.others, "admin-ns", false)) > 0 && strings.Contains(tc.want, "InstanceGroups in") {
				t.Errorf("an update is refused on the number of groups, which it does not change")
			}
			got := QuotaProblems(tc.cfg, &tc.ig, tc.others, "admin-ns", true)
			if tc.want == "" && len(got) > 0 || tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)) {
				t.Errorf("QuotaProblems = %q, want %q", got, tc.want)
			}
		})
	}
}

func relabel(gs []v1alpha1.InstanceGroup, ns string) []v1alpha1.InstanceGroup {
	out := slices.Clone(gs)
	for i := range out {
		out[i].Namespace = ns
	}
	return out
}

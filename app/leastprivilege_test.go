package app

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

func TestLeastPrivilegeFlags(t *testing.T) {
	for _, tc := range []struct {
		args         []string
		wantClusters []string
		wantPath     string
		wantErr      string
	}{
		{nil, nil, awsp.DefaultIAMPath, ""},
		{[]string{"--cluster-name=prod"}, []string{"prod"}, awsp.DefaultIAMPath, ""},
		{[]string{"--cluster-name=prod", "--additional-cluster-names=dev, test", "--iam-path=/nodes/"}, []string{"prod", "dev", "test"}, "/nodes/", ""},
		{[]string{"--iam-path=nodes"}, nil, "", `--iam-path "nodes"`},
		{[]string{"--iam-permissions-boundary=boundary"}, nil, "", "--iam-permissions-boundary"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if got := o.clusters(); !slices.Equal(got, tc.wantClusters) {
				t.Errorf("clusters = %v, want %v", got, tc.wantClusters)
			}
			limits, err := o.roleLimits()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("roleLimits error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || limits.Path != tc.wantPath {
				t.Errorf("roleLimits = %+v, %v; want path %q", limits, err, tc.wantPath)
			}
		})
	}
}

func TestClusterAllowed(t *testing.T) {
	if (LeastPrivilege{}).clusterAllowed(&store.Store{}) != nil {
		t.Error("without --cluster-name the EKS client must not be guarded (the behaviour before the flag)")
	}
	st := &store.Store{}
	allowed := LeastPrivilege{ClusterName: "prod", AdditionalClusterNames: []string{"prod-eu"}}.clusterAllowed(st)
	cfg, err := boundaries.Parse(map[string]string{boundaries.KeyAllowlists: "clusters: [prod-us]\n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		cfg  *boundaries.Config
		want map[string]bool
	}{
		{nil, map[string]bool{"prod": true, "prod-eu": true, "prod-us": false, "dev": false}},
		{cfg, map[string]bool{"prod": true, "prod-eu": true, "prod-us": true, "dev": false}},
	} {
		st.SetValid(step.cfg, "1")
		for name, want := range step.want {
			if got := allowed(name); got != want {
				t.Errorf("ConfigMap %v: allowed(%q) = %v, want %v", step.cfg != nil, name, got, want)
			}
		}
	}
}

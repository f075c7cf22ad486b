package app

import (
	"flag"
	"slices"
	"strings"
	"testing"

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

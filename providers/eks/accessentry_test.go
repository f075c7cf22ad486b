package eks

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// principalEntries is EKS's access entries as the EKS User Guide ("Create
// access entries") describes them: an entry keeps the role id of the
// principal it was created for, and stops authenticating once that role
// is deleted and created again under the same ARN.
type principalEntries struct {
	awsp.EKSAPI
	entries map[string]*ekstypes.AccessEntry
	roleIDs map[string]string // principal ARN -> role id the entry was made for
	roles   *roleIDs
	calls   []string
	now     time.Time
}

func (f *principalEntries) CreateAccessEntry(_ context.Context, in *eks.CreateAccessEntryInput, _ ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error) {
	f.calls = append(f.calls, "CreateAccessEntry")
	if _, ok := f.entries[*in.PrincipalArn]; ok {
		return nil, &ekstypes.ResourceInUseException{Message: awssdk.String("exists")}
	}
	f.now = f.now.Add(time.Minute)
	f.entries[*in.PrincipalArn] = &ekstypes.AccessEntry{PrincipalArn: in.PrincipalArn, Type: in.Type, Tags: in.Tags, CreatedAt: awssdk.Time(f.now)}
	f.roleIDs[*in.PrincipalArn] = f.roles.ids[arnRoleName(*in.PrincipalArn)]
	return &eks.CreateAccessEntryOutput{}, nil
}

func (f *principalEntries) DescribeAccessEntry(_ context.Context, in *eks.DescribeAccessEntryInput, _ ...func(*eks.Options)) (*eks.DescribeAccessEntryOutput, error) {
	f.calls = append(f.calls, "DescribeAccessEntry")
	e, ok := f.entries[*in.PrincipalArn]
	if !ok {
		return nil, &ekstypes.ResourceNotFoundException{Message: awssdk.String("no entry")}
	}
	return &eks.DescribeAccessEntryOutput{AccessEntry: e}, nil
}

func (f *principalEntries) DeleteAccessEntry(_ context.Context, in *eks.DeleteAccessEntryInput, _ ...func(*eks.Options)) (*eks.DeleteAccessEntryOutput, error) {
	f.calls = append(f.calls, "DeleteAccessEntry")
	delete(f.entries, *in.PrincipalArn)
	return &eks.DeleteAccessEntryOutput{}, nil
}

// works reports whether the entry for arn would let a node with the role
// as it is now join.
func (f *principalEntries) works(arn string) bool {
	_, ok := f.entries[arn]
	return ok && f.roleIDs[arn] == f.roles.ids[arnRoleName(arn)]
}

// roleIDs is IAM GetRole of roles by name: their id and creation time.
type roleIDs struct {
	awsp.IAMAPI
	ids     map[string]string
	created map[string]time.Time
}

func (r *roleIDs) GetRole(_ context.Context, in *iam.GetRoleInput, _ ...func(*iam.Options)) (*iam.GetRoleOutput, error) {
	id, ok := r.ids[*in.RoleName]
	if !ok {
		return nil, &iamtypes.NoSuchEntityException{Message: awssdk.String("no role")}
	}
	return &iam.GetRoleOutput{Role: &iamtypes.Role{RoleName: in.RoleName, RoleId: awssdk.String(id), CreateDate: awssdk.Time(r.created[*in.RoleName])}}, nil
}

func TestAccessEntryOfARecreatedRoleIsReplaced(t *testing.T) {
	const arn = "arn:aws:iam::1:role/nodes/web"
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// setup leaves an entry made before the role was re-created.
		tagged   bool // the stale entry carries TagRoleID
		owned    bool // the stale entry carries the cluster's ownership tag
		recreate bool // the role was re-created after the entry
		wantErr  string
		replaced bool
	}{
		{"the same role: left as it is", true, true, false, "", false},
		{"re-created role, entry tagged with the old id: replaced", true, true, true, "", true},
		{"re-created role, an untagged entry of ours older than the role: replaced", false, true, true, "", true},
		{"re-created role, someone else's entry: left, with an error saying so", false, false, true, "did not create it", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			roles := &roleIDs{ids: map[string]string{"web": "AROAOLD"}, created: map[string]time.Time{"web": t0}}
			entries := &principalEntries{entries: map[string]*ekstypes.AccessEntry{}, roleIDs: map[string]string{}, roles: roles, now: t0}
			ig := eksGroup(v1alpha1.EKSConfiguration{})
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(ig).Build()
			cluster := ClusterInfo{Name: "prod", AuthenticationMode: "API"}
			na := nodeAccess{kube: kube, eks: entries, iam: roles}
			if err := na.grant(ctx, ig, cluster, arn); err != nil {
				t.Fatal(err)
			}
			e := entries.entries[arn]
			if e.Tags[TagRoleID] != "AROAOLD" || e.Tags[awsp.ClusterTagKey("prod")] != "owned" {
				t.Fatalf("entry tags %v, want the role id and the cluster's ownership tag", e.Tags)
			}
			if !c.tagged {
				delete(e.Tags, TagRoleID)
			}
			if !c.owned {
				delete(e.Tags, awsp.ClusterTagKey("prod"))
			}
			if c.recreate {
				roles.ids["web"], roles.created["web"] = "AROANEW", t0.Add(time.Hour)
			}
			var events []string
			ctx = providers.WithEvents(ctx, func(_, reason, msg string) { events = append(events, reason+": "+msg) })
			entries.calls = nil
			err := na.grant(ctx, ig, cluster, arn)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("grant = %v, want an error containing %q", err, c.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(entries.calls, ","); c.replaced != strings.Contains(got, "DeleteAccessEntry,CreateAccessEntry") {
				t.Fatalf("calls %s; replaced=%v wanted", got, c.replaced)
			}
			if c.replaced != (len(events) == 1 && strings.HasPrefix(events[0], providers.ReasonAccessEntryReplaced)) {
				t.Fatalf("events %q; one %s wanted: %v", events, providers.ReasonAccessEntryReplaced, c.replaced)
			}
			if works := entries.works(arn); works != (c.wantErr == "") {
				t.Fatalf("the entry lets nodes join: %v; want %v", works, c.wantErr == "")
			}
		})
	}
}

func TestForgetAccessEntryOnlyInAPIModes(t *testing.T) {
	for _, mode := range []ekstypes.AuthenticationMode{ekstypes.AuthenticationModeApi, ekstypes.AuthenticationModeApiAndConfigMap, ekstypes.AuthenticationModeConfigMap} {
		t.Run(string(mode), func(t *testing.T) {
			api := &modeEntries{principalEntries: principalEntries{entries: map[string]*ekstypes.AccessEntry{
				"arn:aws:iam::1:role/ours":   {Tags: map[string]string{awsp.ClusterTagKey("prod"): "owned"}},
				"arn:aws:iam::1:role/theirs": {Tags: map[string]string{}},
			}}, mode: mode}
			for _, arn := range []string{"arn:aws:iam::1:role/ours", "arn:aws:iam::1:role/theirs", "arn:aws:iam::1:role/none"} {
				if err := ForgetAccessEntry(context.Background(), api, "prod", arn); err != nil {
					t.Fatal(err)
				}
			}
			_, ours := api.entries["arn:aws:iam::1:role/ours"]
			if ours != (mode == ekstypes.AuthenticationModeConfigMap) {
				t.Errorf("our entry left: %v (mode %s)", ours, mode)
			}
			if _, theirs := api.entries["arn:aws:iam::1:role/theirs"]; !theirs {
				t.Error("someone else's entry was deleted")
			}
		})
	}
}

type modeEntries struct {
	principalEntries
	mode ekstypes.AuthenticationMode
}

func (m *modeEntries) DescribeCluster(_ context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{Name: in.Name, AccessConfig: &ekstypes.AccessConfigResponse{AuthenticationMode: m.mode}}}, nil
}

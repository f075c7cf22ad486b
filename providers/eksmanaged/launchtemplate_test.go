package eksmanaged

import (
	"context"
	"errors"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

func (e *env) ec2() *fakeEC2 { return e.p.aws.EC2.(*fakeEC2) }

// The node group is created with the controller's launch template: IMDSv2
// required, hop limit 1, the disk in the template and not in the request
// (EKS refuses both), owned by the group (issue 25, N4).
func TestManagedNodeGroupGetsAHardenedLaunchTemplate(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large", VolSize: 40, AmiType: "BOTTLEROCKET_x86_64"})
	e.apply(t, ig)
	ng := e.eks.groups[ngName]
	tmpl := e.ec2().template(awssdk.String(templateName(ig)), nil)
	if ng == nil || tmpl == nil || ng.LaunchTemplate == nil || *ng.LaunchTemplate.Id != tmpl.id || *ng.LaunchTemplate.Version != "1" || ng.DiskSize != nil || ng.RemoteAccess != nil {
		t.Fatalf("node group %+v, template %+v", ng, tmpl)
	}
	d := tmpl.versions[0]
	if m := d.MetadataOptions; m.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired || *m.HttpPutResponseHopLimit != 1 || m.HttpEndpoint != "enabled" {
		t.Errorf("metadata options %+v, want IMDSv2 required with hop limit 1", m)
	}
	if b := d.BlockDeviceMappings; len(b) != 1 || *b[0].DeviceName != "/dev/xvdb" || *b[0].Ebs.VolumeSize != 40 {
		t.Errorf("block devices %+v, want Bottlerocket's data volume of 40 GiB", b)
	}
	if err := ownership.OwnerOf(ig, "prod").Check("launch template", tmpl.name, ownership.EC2TagMap(tmpl.tags)); err != nil {
		t.Errorf("template tags: %v", err)
	}
	if !strings.HasPrefix(tmpl.name, "mng-") || len(tmpl.name) > ownership.LimitLaunchTemplate {
		t.Errorf("template name %q", tmpl.name)
	}
}

// A change of the template's data (the disk size) is a new version and a
// version update of the same node group, not a replacement.
func TestManagedTemplateChangeIsAVersionUpdate(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large", VolSize: 20})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()
	ig.Spec.EKSManaged.Configuration.VolSize = 50
	ig.Generation++
	e.p.reads.Forget(readsID(ig))
	obs := e.apply(t, ig)
	calls := e.eks.takeCalls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "UpdateNodegroupVersion") || !strings.HasSuffix(calls[0], "template 2") || !obs.Updating {
		t.Fatalf("calls %v, observation %+v; want one version update to template version 2", calls, obs)
	}
	tmpl := e.ec2().template(awssdk.String(templateName(ig)), nil)
	if len(tmpl.versions) != 2 || *tmpl.versions[1].BlockDeviceMappings[0].Ebs.VolumeSize != 50 || len(e.eks.groups) != 1 {
		t.Fatalf("template versions %d, node groups %d", len(tmpl.versions), len(e.eks.groups))
	}
	// Unchanged: nothing more.
	e.eks.settle()
	e.p.reads.Forget(readsID(ig))
	if e.apply(t, ig); e.eks.takeCalls() != nil || len(tmpl.versions) != 2 {
		t.Fatalf("a second pass changed something: %d versions", len(tmpl.versions))
	}
}

// SSH remote access: EKS prohibits remoteAccess with a launch template,
// so such a node group keeps EKS's template.
func TestManagedRemoteAccessKeepsEKSTemplate(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, KeyPairName: "ops", SecurityGroups: []string{"sg-1"}, VolSize: 30})
	e.apply(t, ig)
	ng := e.eks.groups[ngName]
	if ng.LaunchTemplate != nil || ng.RemoteAccess == nil || awssdk.ToInt32(ng.DiskSize) != 30 || len(e.ec2().templates) != 0 {
		t.Fatalf("node group %+v, templates %d", ng, len(e.ec2().templates))
	}
}

// A node group an earlier version created without a launch template is
// replaced (blue/green, drained) by one with the controller's: EKS does
// not add a template to a node group.
func TestManagedNodeGroupWithoutTemplateIsReplaced(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.groups[ngName].LaunchTemplate = nil // as an earlier version made it
	e.eks.takeCalls()
	e.p.reads.Forget(readsID(ig))
	obs := e.apply(t, ig)
	calls := e.eks.takeCalls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "CreateNodegroup "+ngName+"-") || !strings.Contains(obs.Message, "launchTemplate none (EKS's) -> "+templateName(ig)) {
		t.Fatalf("calls %v, message %q", calls, obs.Message)
	}
}

// Deleting the group deletes its template after its node groups; a
// template of the name that is someone else's is refused and left.
func TestManagedTemplateDeletedWithTheGroupAndNeverForeign(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"})
	e.apply(t, ig)
	e.eks.settle()
	ctx := context.Background()
	if done, err := e.p.Delete(ctx, ig); done || err != nil || len(e.ec2().templates) != 1 {
		t.Fatalf("first Delete: %v, %v, templates %d (kept while the node group is deleting)", done, err, len(e.ec2().templates))
	}
	e.eks.settle()
	if done, err := e.p.Delete(ctx, ig); !done || err != nil || len(e.ec2().templates) != 0 {
		t.Fatalf("Delete once gone: %v, %v, templates %d", done, err, len(e.ec2().templates))
	}

	// Another group's template under the name.
	e = newEnv()
	other := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}})
	other.Namespace = "team-b"
	e.ec2().templates = map[string]*fakeTemplate{"lt-9": {id: "lt-9", name: templateName(ig),
		tags: ownership.EC2Tags(ownership.OwnerOf(other, "prod").Tags()), versions: []ec2types.ResponseLaunchTemplateData{{}}, descs: []string{"x"}}}
	_, err := e.p.Apply(ctx, ig)
	var foreign *ownership.ForeignError
	if !errors.As(err, &foreign) || len(e.eks.groups) != 0 {
		t.Fatalf("Apply with a foreign template: %v, node groups %d", err, len(e.eks.groups))
	}
	if done, err := e.p.Delete(ctx, ig); !done || err != nil || e.ec2().templates["lt-9"] == nil {
		t.Fatalf("Delete touched a foreign template: %v, %v", done, err)
	}
}

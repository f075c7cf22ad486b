package eks

import (
	"slices"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/test/env"
)

// TestUpgradeKeepsTemplatesOfTheEarlierHashOnMoto writes a launch template
// the way the controller did before the canonical launch data (the
// description is the hash of the SDK request's JSON), then converges it
// with this version through moto: the stored data read back equals the
// desired data, so no version is added and no node would rotate. A real
// change after that adds a version with the canonical description, which
// the next pass keeps.
func TestUpgradeKeepsTemplatesOfTheEarlierHashOnMoto(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true})
	ctx := t.Context()
	api := ec2.NewFromConfig(e.AWS)
	ig, in := pinnedGroup()
	want := launchDataOf(ig, in)
	const name = "prod-team-a-web"
	if _, err := api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: awssdk.String(name),
		LaunchTemplateData: want.request(), VersionDescription: awssdk.String(legacyDescriptionOf(want.request()))}); err != nil {
		t.Fatal(err)
	}

	contents := &versionContents{}
	converge := func() int64 {
		t.Helper()
		st, err := describeTemplate(ctx, api, name)
		if err != nil {
			t.Fatal(err)
		}
		st, err = ensureLaunchTemplate(ctx, api, ig, name, st, launchDataOf(ig, in), contents)
		if err != nil {
			t.Fatal(err)
		}
		return st.version
	}
	if v := converge(); v != 1 {
		st, _ := describeTemplate(ctx, api, name)
		t.Fatalf("the template written by the earlier hash got version %d; stored data read back:\n%s\nwant:\n%s",
			v, launchDataFromStored(st.data).encode(), want.encode())
	}

	ig.Spec.EKS.Configuration.InstanceType = "m5.xlarge"
	if v := converge(); v != 2 {
		t.Fatalf("a changed instance type gave version %d, want 2", v)
	}
	st, err := describeTemplate(ctx, api, name)
	if err != nil {
		t.Fatal(err)
	}
	if st.description != launchDataOf(ig, in).description() {
		t.Errorf("version 2 description %q, want the canonical %q", st.description, launchDataOf(ig, in).description())
	}
	if v := converge(); v != 2 {
		t.Errorf("an unchanged spec gave version %d, want 2", v)
	}

	// Instances still on version 1 are drifted from version 2; their
	// version's content is read (listing every version on moto).
	upToDate, err := contents.upToDate(ctx, api, name, st, []string{"1"})
	if err != nil || upToDate("1") || !upToDate("2") {
		t.Fatalf("version 1 up to date %v, 2 %v (%v); want false, true", upToDate("1"), upToDate("2"), err)
	}
	// Reverting the change makes version 1 (same content, the earlier
	// hash) the default again: no version 3, its instances stay.
	ig.Spec.EKS.Configuration.InstanceType = "m5.large"
	if v := converge(); v != 1 {
		t.Fatalf("the reverted instance type gave version %d, want 1 made the default again", v)
	}
	if st, err := describeTemplate(ctx, api, name); err != nil || st.version != 1 {
		t.Fatalf("default version %d (%v), want 1", st.version, err)
	}
	out, err := api.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String(name)})
	if err != nil || len(out.LaunchTemplateVersions) != 2 {
		t.Errorf("the template has %d version(s) (%v), want 2: the revert created one", len(out.LaunchTemplateVersions), err)
	}
}

// TestSubFamilyFlexibleOnMoto resolves a sub-family through moto's
// DescribeInstanceTypes (real instance type data, the filters AWS has).
func TestSubFamilyFlexibleOnMoto(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true})
	pools := &instancePools{api: ec2.NewFromConfig(e.AWS), ttl: time.Hour, now: time.Now}
	got, err := pools.subFamilyFlexible(t.Context(), "m5.xlarge")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "m5.xlarge" || !slices.Contains(got, "m5a.xlarge") || !slices.Contains(got, "m5d.xlarge") {
		t.Errorf("SubFamilyFlexible of m5.xlarge = %v, want m5.xlarge first, with m5a.xlarge and m5d.xlarge", got)
	}
	for _, other := range []string{"m6i.xlarge", "t3.xlarge", "m5.2xlarge", "m6g.xlarge"} {
		if slices.Contains(got, other) {
			t.Errorf("SubFamilyFlexible of m5.xlarge = %v includes %s", got, other)
		}
	}
	if _, err := pools.subFamilyFlexible(t.Context(), "m5.enormous"); !providers.IsSpecError(err) {
		t.Errorf("an unknown base type: %v, want a SpecError", err)
	}
}

package eks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// is judges a version up to date when it is version (number equality).
func is(version string) func(string) bool {
	return func(v string) bool { return v == version }
}

// fakeTemplate is one launch template with its versions, kept as EC2 keeps
// them: numbers given in order, a default, DescribeLaunchTemplateVersions
// by $Default, $Latest, numbers or all (two a page).
type fakeTemplate struct {
	awsp.EC2API
	name     string
	versions []ec2types.LaunchTemplateVersion
	def      int64
	// created and defaults count CreateLaunchTemplateVersion and record
	// ModifyLaunchTemplate; listed counts the unfiltered listings.
	created  int
	defaults []string
	listed   int
	// last is the last version number given (never given again).
	last int64
}

func newFakeTemplate(name string, versions ...ec2types.LaunchTemplateVersion) *fakeTemplate {
	f := &fakeTemplate{name: name}
	for _, v := range versions {
		v.LaunchTemplateId = awssdk.String("lt-0abc")
		f.versions = append(f.versions, v)
		f.def = awssdk.ToInt64(v.VersionNumber)
		f.last = f.def
	}
	return f
}

// add appends a version carrying d (not the default).
func (f *fakeTemplate) add(desc string, data *ec2types.ResponseLaunchTemplateData) int64 {
	f.last++
	n := f.last
	f.versions = append(f.versions, ec2types.LaunchTemplateVersion{LaunchTemplateId: awssdk.String("lt-0abc"), VersionNumber: awssdk.Int64(n),
		VersionDescription: awssdk.String(desc), LaunchTemplateData: data})
	return n
}

func (f *fakeTemplate) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	out := &ec2.DescribeLaunchTemplateVersionsOutput{}
	if len(in.Versions) == 0 {
		if in.NextToken == nil {
			f.listed++
		}
		start, _ := strconv.Atoi(awssdk.ToString(in.NextToken))
		end := min(start+2, len(f.versions))
		for _, v := range f.versions[start:end] {
			v.DefaultVersion = awssdk.Bool(awssdk.ToInt64(v.VersionNumber) == f.def)
			out.LaunchTemplateVersions = append(out.LaunchTemplateVersions, v)
		}
		if end < len(f.versions) {
			out.NextToken = awssdk.String(strconv.Itoa(end))
		}
		return out, nil
	}
	for _, want := range in.Versions {
		for _, v := range f.versions {
			n := awssdk.ToInt64(v.VersionNumber)
			if want == "$Default" && n == f.def || want == "$Latest" && n == awssdk.ToInt64(f.versions[len(f.versions)-1].VersionNumber) || want == strconv.FormatInt(n, 10) {
				v.DefaultVersion = awssdk.Bool(n == f.def)
				out.LaunchTemplateVersions = append(out.LaunchTemplateVersions, v)
			}
		}
	}
	return out, nil
}

func (f *fakeTemplate) CreateLaunchTemplateVersion(_ context.Context, in *ec2.CreateLaunchTemplateVersionInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateVersionOutput, error) {
	f.created++
	n := f.add(awssdk.ToString(in.VersionDescription), storedAs(in.LaunchTemplateData))
	return &ec2.CreateLaunchTemplateVersionOutput{LaunchTemplateVersion: &ec2types.LaunchTemplateVersion{VersionNumber: awssdk.Int64(n)}}, nil
}

func (f *fakeTemplate) ModifyLaunchTemplate(_ context.Context, in *ec2.ModifyLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.ModifyLaunchTemplateOutput, error) {
	f.defaults = append(f.defaults, awssdk.ToString(in.DefaultVersion))
	f.def, _ = strconv.ParseInt(awssdk.ToString(in.DefaultVersion), 10, 64)
	return &ec2.ModifyLaunchTemplateOutput{}, nil
}

// converge is one pass of the provisioner over the template: read the
// default, ensure it carries d.
func (f *fakeTemplate) converge(t *testing.T, ig *v1alpha1.InstanceGroup, d launchData, contents *versionContents) templateState {
	t.Helper()
	st, err := describeTemplate(context.Background(), f, f.name)
	if err != nil {
		t.Fatal(err)
	}
	if st, err = ensureLaunchTemplate(context.Background(), f, ig, f.name, st, d, contents); err != nil {
		t.Fatal(err)
	}
	return st
}

// A change reverted (a halted wave's rollback, an edit undone, a spot
// recommendation flip-flop) makes the version that carries the reverted
// content the default again: no version is created, and the instances
// launched from it are up to date while those of the reverted change are
// not.
func TestRevertMakesTheVersionOfTheSameContentTheDefault(t *testing.T) {
	ig, in := pinnedGroup()
	a := launchDataOf(ig, in)
	f := newFakeTemplate("lt")
	f.add(a.description(), storedAs(a.request()))
	f.def = 1
	contents := &versionContents{}

	changed := ig.DeepCopy()
	changed.Spec.EKS.Configuration.InstanceType = "m5.xlarge"
	b := launchDataOf(changed, in)
	st := f.converge(t, changed, b, contents)
	if st.version != 2 || f.created != 1 {
		t.Fatalf("a change gave version %d (%d created), want a new version 2", st.version, f.created)
	}
	// The group's instances, launched from version 1, are drifted: their
	// version's content is read (one listing).
	if upToDate, err := contents.upToDate(context.Background(), f, "lt", st, []string{"1", "1", "2"}); err != nil || upToDate("1") || !upToDate("2") || f.listed != 1 {
		t.Fatalf("after the change: version 1 up to date %v, 2 %v, %d listing(s) (%v)", upToDate("1"), upToDate("2"), f.listed, err)
	}
	st = f.converge(t, ig, a, contents)
	if st.version != 1 || f.created != 1 || f.def != 1 {
		t.Fatalf("the revert gave version %d, default %d, %d version(s) created; want version 1 made the default again, none created", st.version, f.def, f.created)
	}
	if fmt.Sprint(f.defaults) != "[2 1]" {
		t.Errorf("ModifyLaunchTemplate defaults %v, want [2 1]", f.defaults)
	}
	upToDate, err := contents.upToDate(context.Background(), f, "lt", st, []string{"1", "2", "1"})
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{"1": true, "2": false, "": false, "$Latest": false} {
		if got := upToDate(v); got != want {
			t.Errorf("an instance launched from version %q up to date: %v, want %v", v, got, want)
		}
	}
	listed := f.listed
	if st := f.converge(t, ig, a, contents); st.version != 1 || f.listed != listed || len(f.defaults) != 2 {
		t.Errorf("a settled template: version %d, %d more listing(s), defaults %v; want 1, none, unchanged", st.version, f.listed-listed, f.defaults)
	}

	// A controller restarted between the change and the revert remembers
	// no version: it creates version 3 with version 1's content, and the
	// instances of version 1 are still up to date with it.
	f.converge(t, changed, b, contents)
	restarted := &versionContents{}
	st = f.converge(t, ig, a, restarted)
	if st.version != 3 || f.created != 2 {
		t.Fatalf("after a restart the revert gave version %d (%d created), want a new 3", st.version, f.created)
	}
	upToDate, err = restarted.upToDate(context.Background(), f, "lt", st, []string{"1", "2", "3"})
	if err != nil || !upToDate("1") || upToDate("2") || !upToDate("3") {
		t.Errorf("after a restart: versions 1, 2, 3 up to date %v %v %v (%v), want true false true", upToDate("1"), upToDate("2"), upToDate("3"), err)
	}
}

// Versions are judged by content whatever their numbers: a version an
// earlier controller created identical to an older one, a version written
// with the earlier hash (judged by its stored data), a pruned version and
// one made by hand.
func TestUpToDateIsJudgedByContent(t *testing.T) {
	ig, in := pinnedGroup()
	a := launchDataOf(ig, in)
	other := ig.DeepCopy()
	other.Spec.EKS.Configuration.InstanceType = "c5.large"
	b := launchDataOf(other, in)
	f := newFakeTemplate("lt")
	f.add(legacyDescriptionOf(a.request()), storedAs(a.request())) // 1: a, the earlier hash
	f.add(b.description(), storedAs(b.request()))                  // 2: b
	f.add(a.description(), storedAs(a.request()))                  // 3: a again (rotated every node before)
	f.add("made by hand", storedAs(a.request()))                   // 4: a, not ours to compare
	f.add(b.description(), storedAs(b.request()))                  // 5: b (then 6 pruned)
	f.add(a.description(), storedAs(a.request()))                  // 6
	f.versions = slices.Delete(f.versions, 5, 6)
	f.add(a.description(), storedAs(a.request())) // 7, the default
	f.def = 7
	contents := &versionContents{}
	st := f.converge(t, ig, a, contents)
	if st.version != 7 || f.created != 0 || f.listed != 0 {
		t.Fatalf("default 7 carries the content: got version %d, %d created, %d listing(s)", st.version, f.created, f.listed)
	}
	upToDate, err := contents.upToDate(context.Background(), f, "lt", st, []string{"1", "2", "3", "4", "5", "6", "7"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"1": true, "2": false, "3": true, "4": false, "5": false, "6": false, "7": true}
	for v, w := range want {
		if got := upToDate(v); got != w {
			t.Errorf("version %s up to date: %v, want %v", v, got, w)
		}
	}
	if f.listed != 1 {
		t.Errorf("%d listing(s) of the versions, want 1 (paginated)", f.listed)
	}
	if _, err := contents.upToDate(context.Background(), f, "lt", st, []string{"1", "3", "7"}); err != nil || f.listed != 1 {
		t.Errorf("versions already read were listed again (%d listings, %v)", f.listed, err)
	}
	if _, err := contents.upToDate(context.Background(), f, "lt", st, []string{"7"}); err != nil || f.listed != 1 {
		t.Errorf("a group all on its default version made a call (%d listings, %v)", f.listed, err)
	}
	contents.forget("lt")
	if _, err := contents.upToDate(context.Background(), f, "lt", st, []string{"3"}); err != nil || f.listed != 2 {
		t.Errorf("a forgotten template was not read again (%d listings, %v)", f.listed, err)
	}
}

// A version created by a process that stopped before making it the
// default is made the default, not created again; a new content gets a
// new version.
func TestVersionCreatedButNotDefaultIsFinished(t *testing.T) {
	ig, in := pinnedGroup()
	a := launchDataOf(ig, in)
	changed := ig.DeepCopy()
	changed.Spec.EKS.Configuration.InstanceType = "m5.2xlarge"
	b := launchDataOf(changed, in)
	f := newFakeTemplate("lt")
	f.add(a.description(), storedAs(a.request()))
	f.add(b.description(), storedAs(b.request()))
	f.def = 1
	st := f.converge(t, changed, b, &versionContents{})
	if st.version != 2 || f.created != 0 || fmt.Sprint(f.defaults) != "[2]" || f.listed != 0 {
		t.Fatalf("version %d, %d created, defaults %v; want 2 made the default, none created", st.version, f.created, f.defaults)
	}
	third := ig.DeepCopy()
	third.Spec.EKS.Configuration.KeyPairName = "other"
	if st := f.converge(t, third, launchDataOf(third, in), &versionContents{}); st.version != 3 || f.created != 1 || f.def != 3 {
		t.Errorf("new content: version %d, %d created, default %d; want a new default version 3", st.version, f.created, f.def)
	}
}

// rotating judges versions with the content predicate: an instance of an
// older version number carrying the same content does not rotate.
func TestRotatingJudgesByContent(t *testing.T) {
	same := func(v string) bool { return v == "3" || v == "1" }
	ig := &v1alpha1.InstanceGroup{}
	if rotating(ig, nil, contentDrift(nil, nil, same)) {
		t.Error("an empty group rotates")
	}
	if got := rotating(ig, []astypes.Instance{instance("i-1", "1", "InService"), instance("i-2", "3", "InService")}, contentDrift([]astypes.Instance{instance("i-1", "1", "InService"), instance("i-2", "3", "InService")}, nil, same)); got {
		t.Error("an instance of version 1, same content as 3, makes the group rotate")
	}
	if got := rotating(ig, []astypes.Instance{instance("i-1", "2", "InService")}, contentDrift([]astypes.Instance{instance("i-1", "2", "InService")}, nil, same)); !got {
		t.Error("an instance of version 2 (other content) does not make the group rotate")
	}
}

package eks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// launchInput is what a launch template version is built from.
type launchInput struct {
	imageID        string
	profileName    string
	securityGroups []string
	userData       string
}

// launchTemplateData is the launch template data of ig as sent to EC2
// (built from launchDataOf, the description drift is decided from).
func launchTemplateData(ig *v1alpha1.InstanceGroup, in launchInput) *ec2types.RequestLaunchTemplateData {
	return launchDataOf(ig, in).request()
}

// templateState is the launch template as found: its default version,
// the one the group's Auto Scaling group launches from.
type templateState struct {
	exists bool
	id     string
	// version is the default version's number.
	version int64
	// imageID and description are the default version's.
	imageID     string
	description string
	// data is the default version's data, compared with the desired data
	// when the version was written by an earlier controller version.
	data *ec2types.ResponseLaunchTemplateData
	// latest is the template's latest version when it is not the default
	// (created by a process that stopped before making it the default, or
	// a change since reverted); nil otherwise.
	latest *ec2types.LaunchTemplateVersion
}

// describeTemplate reads the template's default and latest versions (one
// EC2 DescribeLaunchTemplateVersions, $Default and $Latest). A template
// that does not exist is no error (exists false).
func describeTemplate(ctx context.Context, api awsp.EC2API, name string) (templateState, error) {
	out, err := api.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: awssdk.String(name), Versions: []string{"$Default", "$Latest"}})
	if err != nil {
		if launchtemplate.IsNotFound(err) {
			return templateState{}, nil
		}
		return templateState{}, fmt.Errorf("ec2 DescribeLaunchTemplateVersions %s: %w", name, err)
	}
	var st templateState
	var latest *ec2types.LaunchTemplateVersion
	for i, v := range out.LaunchTemplateVersions {
		if awssdk.ToBool(v.DefaultVersion) && !st.exists {
			st = stateOf(v)
		} else if latest == nil || awssdk.ToInt64(v.VersionNumber) > awssdk.ToInt64(latest.VersionNumber) {
			latest = &out.LaunchTemplateVersions[i]
		}
	}
	if !st.exists && latest != nil { // no version said it is the default
		st, latest = stateOf(*latest), nil
	}
	if latest != nil && awssdk.ToInt64(latest.VersionNumber) != st.version {
		st.latest = latest
	}
	return st, nil
}

// stateOf is the templateState of version v as the default.
func stateOf(v ec2types.LaunchTemplateVersion) templateState {
	st := templateState{exists: true, id: awssdk.ToString(v.LaunchTemplateId), version: awssdk.ToInt64(v.VersionNumber),
		description: awssdk.ToString(v.VersionDescription), data: v.LaunchTemplateData}
	if v.LaunchTemplateData != nil {
		st.imageID = awssdk.ToString(v.LaunchTemplateData.ImageId)
	}
	return st
}

// ensureLaunchTemplate makes the default version of the group's launch
// template one that carries want, and returns it (the Auto Scaling group
// launches from it):
//   - the default carries want: nothing is written;
//   - another version carries want (a rollback, an edit reverted, a spot
//     recommendation flip-flop, or a version created by a process that
//     stopped before making it the default): the newest such version is
//     made the default again (EC2 ModifyLaunchTemplate), so the instances
//     launched from it stay up to date and nothing is rotated for it;
//   - otherwise a new version is created (CreateLaunchTemplateVersion,
//     then ModifyLaunchTemplate), or the template itself
//     (CreateLaunchTemplate).
//
// A version carries want when its content key (contentKey: the hash of the
// canonical launch data, kept in the version description) is want's.
// Other versions are looked for among the latest (st.latest) and those
// contents remembers (read for the instances' versions, or written here),
// at no call: the versions instances run are the ones that matter, and
// contents knows them. A version no instance runs and not remembered (the
// controller restarted) is created again with the same content, which
// rotates nothing (drift is judged by content).
func ensureLaunchTemplate(ctx context.Context, api awsp.EC2API, ig *v1alpha1.InstanceGroup, name string, st templateState, want launchData, contents *versionContents) (templateState, error) {
	desc := want.description()
	if st.exists && (st.description == desc || sameAsStored(st, want)) {
		return st, nil
	}
	data := want.request()
	if !st.exists {
		out, err := api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: awssdk.String(name), LaunchTemplateData: data, VersionDescription: awssdk.String(desc),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ownership.EC2Tags(templateTags(ig))}},
		})
		if err != nil {
			return templateState{}, fmt.Errorf("ec2 CreateLaunchTemplate %s: %w", name, err)
		}
		created := templateState{exists: true, id: awssdk.ToString(out.LaunchTemplate.LaunchTemplateId), version: awssdk.ToInt64(out.LaunchTemplate.LatestVersionNumber),
			imageID: want.ImageID, description: desc}
		contents.remember(name, created.id, created.version, desc)
		return created, nil
	}
	if st.latest != nil && contentKey(*st.latest) == desc {
		if err := setDefaultVersion(ctx, api, name, awssdk.ToInt64(st.latest.VersionNumber)); err != nil {
			return templateState{}, err
		}
		return stateOf(*st.latest), nil
	}
	if found, ok := contents.newestWith(name, st.id, desc); ok {
		if err := setDefaultVersion(ctx, api, name, found); err != nil {
			return templateState{}, err
		}
		return templateState{exists: true, id: st.id, version: found, imageID: want.ImageID, description: desc}, nil
	}
	out, err := api.CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{
		LaunchTemplateName: awssdk.String(name), LaunchTemplateData: data, VersionDescription: awssdk.String(desc)})
	if err != nil {
		return templateState{}, fmt.Errorf("ec2 CreateLaunchTemplateVersion %s: %w", name, err)
	}
	version := awssdk.ToInt64(out.LaunchTemplateVersion.VersionNumber)
	contents.remember(name, st.id, version, desc)
	if err := setDefaultVersion(ctx, api, name, version); err != nil {
		return templateState{}, err
	}
	return templateState{exists: true, id: st.id, version: version, imageID: want.ImageID, description: desc}, nil
}

// setDefaultVersion makes version the default of the launch template
// (EC2 ModifyLaunchTemplate).
func setDefaultVersion(ctx context.Context, api awsp.EC2API, name string, version int64) error {
	if _, err := api.ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{
		LaunchTemplateName: awssdk.String(name), DefaultVersion: awssdk.String(strconv.FormatInt(version, 10))}); err != nil {
		return fmt.Errorf("ec2 ModifyLaunchTemplate %s default version %d: %w", name, version, err)
	}
	return nil
}

// pruneVersions deletes versions older than the newest keep, except the
// default and those instances still run: EC2 DescribeLaunchTemplateVersions
// (every page) and DeleteLaunchTemplateVersions (at most
// maxVersionsPerDelete per call). A version the answer lists under
// UnsuccessfullyDeletedLaunchTemplateVersions is an error naming it and
// the EC2 code (the prune is tried again at the next pass), except
// launchTemplateVersionDoesNotExist: it is gone already.
func pruneVersions(ctx context.Context, api awsp.EC2API, name string, keep int, inUse map[string]bool) error {
	var versions []int64
	pages := ec2.NewDescribeLaunchTemplateVersionsPaginator(api, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: awssdk.String(name), MaxResults: awssdk.Int32(200)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("ec2 DescribeLaunchTemplateVersions %s: %w", name, err)
		}
		for _, v := range out.LaunchTemplateVersions {
			if !awssdk.ToBool(v.DefaultVersion) {
				versions = append(versions, awssdk.ToInt64(v.VersionNumber))
			}
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] > versions[j] })
	var del []string
	for i, v := range versions {
		s := strconv.FormatInt(v, 10)
		if i >= keep-1 && !inUse[s] {
			del = append(del, s)
		}
	}
	var failed []string
	for chunk := range slices.Chunk(del, maxVersionsPerDelete) {
		// Housekeeping gets one attempt: the next reconcile tries again, and a
		// throttled or failing call retried with backoff (up to a minute)
		// would hold the reconcile, and the rotation it drives, that long.
		out, err := api.DeleteLaunchTemplateVersions(ctx, &ec2.DeleteLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String(name), Versions: chunk},
			func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
		if err != nil {
			return fmt.Errorf("ec2 DeleteLaunchTemplateVersions %s %v: %w", name, chunk, err)
		}
		for _, u := range out.UnsuccessfullyDeletedLaunchTemplateVersions {
			code, msg := "", ""
			if u.ResponseError != nil {
				code, msg = string(u.ResponseError.Code), awssdk.ToString(u.ResponseError.Message)
			}
			if u.ResponseError != nil && u.ResponseError.Code == ec2types.LaunchTemplateErrorCodeLaunchTemplateVersionDoesNotExist {
				continue
			}
			failed = append(failed, fmt.Sprintf("version %d (%s: %s)", awssdk.ToInt64(u.VersionNumber), code, msg))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("ec2 DeleteLaunchTemplateVersions %s: not deleted: %s", name, strings.Join(failed, "; "))
	}
	return nil
}

// maxVersionsPerDelete is how many versions one DeleteLaunchTemplateVersions
// may name (EC2 API reference: up to 200).
const maxVersionsPerDelete = 200

// deleteLaunchTemplate removes the group's launch template if its
// ownership tags name the group (EC2 DescribeLaunchTemplates,
// DeleteLaunchTemplate); someone else's template of that name is left.
func deleteLaunchTemplate(ctx context.Context, api awsp.EC2API, ig *v1alpha1.InstanceGroup, name string) error {
	out, err := api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		if launchtemplate.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("ec2 DescribeLaunchTemplates %s: %w", name, err)
	}
	for _, lt := range out.LaunchTemplates {
		if ownerOf(ig).Check("launch template", name, ownership.EC2TagMap(lt.Tags)) != nil {
			continue
		}
		if _, err := api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil && !launchtemplate.IsNotFound(err) {
			return fmt.Errorf("ec2 DeleteLaunchTemplate %s: %w", name, err)
		}
	}
	return nil
}

// ownedTemplates remembers launch templates whose ownership was verified,
// by "<name>/<owner uid>" -> template id, so a Ready group's reconcile
// costs no extra call; a template replaced under the same name has
// another id and is checked again.
type ownedTemplates struct{ m sync.Map }

// check verifies that the existing template st is ig's (EC2
// DescribeLaunchTemplates, once per template id; one an earlier group of
// the same name left is adopted, see providers.Adopt) and adds the ownership
// tags a template of an earlier version lacks (CreateTags). Someone
// else's template is an *ownership.ForeignError.
func (o *ownedTemplates) check(ctx context.Context, api awsp.EC2API, a *ownership.Adopter, ig *v1alpha1.InstanceGroup, name string, st templateState) error {
	if !st.exists {
		return nil
	}
	key := name + "/" + string(ig.UID)
	if id, ok := o.m.Load(key); ok && id == st.id {
		return nil
	}
	out, err := api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		return fmt.Errorf("ec2 DescribeLaunchTemplates %s: %w", name, err)
	}
	for _, lt := range out.LaunchTemplates {
		tags := ownership.EC2TagMap(lt.Tags)
		owner := ownerOf(ig)
		retag := func(ctx context.Context, t map[string]string) error {
			_, err := api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{awssdk.ToString(lt.LaunchTemplateId)}, Tags: ownership.EC2Tags(t)})
			return err
		}
		adopted, err := providers.Adopt(ctx, a, owner, "launch template", name, tags, retag)
		if err != nil {
			return err
		}
		if adopted {
			tags = maps.Clone(tags)
			maps.Copy(tags, owner.Tags())
		}
		if missing := owner.Missing(tags); len(missing) > 0 {
			if _, err := api.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{awssdk.ToString(lt.LaunchTemplateId)}, Tags: ownership.EC2Tags(missing)}); err != nil {
				return fmt.Errorf("ec2 CreateTags on launch template %s: %w", name, err)
			}
		}
		o.m.Store(key, awssdk.ToString(lt.LaunchTemplateId))
	}
	return nil
}

// templateTags are the tags a launch template is created with: the
// ownership tags and the cluster's (kubernetes.io/cluster/<cluster>=owned,
// which the controller's IAM policy requires on launch template writes).
func templateTags(ig *v1alpha1.InstanceGroup) map[string]string {
	t := ownerOf(ig).Tags()
	t["kubernetes.io/cluster/"+ig.Spec.EKS.Configuration.ClusterName] = "owned"
	return t
}

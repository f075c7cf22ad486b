package eks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Drift is decided by content, not by version number: an instance is up to
// date when the launch template version it was launched from carries the
// same launch data as the version the group launches from now, whatever
// their numbers. A rollback, an edit reverted later or a spot
// recommendation flip-flop then replaces only the instances launched from
// the content that changed (Karpenter and Cluster API MachineDeployments
// drift on a spec hash the same way).

// contentKey is what launch template version v carries, comparable across
// versions: its description when written in launchData's current encoding
// (the hash of the canonical launch data); for a version written by an
// earlier controller version (legacyDescription), the description its
// stored data has in the current encoding (as sameAsStored compares it);
// "" for any other version (made by hand), which carries nothing the
// controller can compare.
func contentKey(v ec2types.LaunchTemplateVersion) string {
	desc := awssdk.ToString(v.VersionDescription)
	switch {
	case strings.HasPrefix(desc, versionDescriptionPrefix+launchDataVersion+":"):
		return desc
	case legacyDescription(desc) && v.LaunchTemplateData != nil:
		return launchDataFromStored(v.LaunchTemplateData).description()
	}
	return ""
}

// versionContents remembers the content key of each launch template
// version read, by template (name and id) and version number. A version's
// data never changes and a deleted version's number is never given again,
// so what is read once stays true; a template deleted and created again
// under its name has another id.
type versionContents struct {
	mu sync.Mutex
	// byTemplate: "<name>/<id>" -> version -> content key ("" for a
	// version that is no longer there or carries nothing comparable).
	byTemplate map[string]map[int64]string
	// ids is the id last read for each template name.
	ids map[string]string
}

// list reads every version of template name (EC2
// DescribeLaunchTemplateVersions without a version filter, paginated),
// remembers their content keys and returns them.
func (c *versionContents) list(ctx context.Context, api awsp.EC2API, name string) ([]ec2types.LaunchTemplateVersion, error) {
	var all []ec2types.LaunchTemplateVersion
	in := &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: awssdk.String(name)}
	for {
		out, err := api.DescribeLaunchTemplateVersions(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeLaunchTemplateVersions %s: %w", name, err)
		}
		all = append(all, out.LaunchTemplateVersions...)
		if awssdk.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTemplate == nil {
		c.byTemplate, c.ids = map[string]map[int64]string{}, map[string]string{}
	}
	newest := int64(0)
	for _, v := range all {
		id := awssdk.ToString(v.LaunchTemplateId)
		key := name + "/" + id
		if c.ids[name] != id {
			delete(c.byTemplate, name+"/"+c.ids[name])
			c.ids[name] = id
		}
		if c.byTemplate[key] == nil {
			c.byTemplate[key] = map[int64]string{}
		}
		c.byTemplate[key][awssdk.ToInt64(v.VersionNumber)] = contentKey(v)
		newest = max(newest, awssdk.ToInt64(v.VersionNumber))
	}
	if id, ok := c.ids[name]; ok {
		known := c.byTemplate[name+"/"+id]
		for n := int64(1); n <= newest; n++ {
			if _, ok := known[n]; !ok {
				known[n] = "" // deleted (pruned): carries nothing
			}
		}
	}
	return all, nil
}

// upToDate returns whether an instance launched from version v (a decimal
// version number, as EC2's aws:ec2launchtemplate:version tag gives it) is
// up to date with st, the version the group launches from now: v is st's
// version, or carries the same content (contentKey). Versions not read
// yet are read once, all together (list); an unknown version ("" or not a
// number) is not up to date. Errors come from
// DescribeLaunchTemplateVersions.
func (c *versionContents) upToDate(ctx context.Context, api awsp.EC2API, name string, st templateState, versions []string) (func(v string) bool, error) {
	want := st.description
	if legacyDescription(want) && st.data != nil {
		want = launchDataFromStored(st.data).description()
	}
	target := strconv.FormatInt(st.version, 10)
	known := c.known(name, st.id, versions, target)
	if known == nil {
		if _, err := c.list(ctx, api, name); err != nil {
			return nil, err
		}
		known = c.known(name, st.id, versions, target)
	}
	id := st.id
	return func(v string) bool {
		if v == target {
			return true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || want == "" {
			return false
		}
		key, ok := known[n]
		if !ok { // not among versions (a warm pool's instance): as remembered
			key = c.key(name, id, n)
		}
		return key == want
	}, nil
}

// key is the remembered content key of version n of template name ("" when
// not known).
func (c *versionContents) key(name, id string, n int64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		id = c.ids[name]
	}
	return c.byTemplate[name+"/"+id][n]
}

// known returns the content keys of versions (target left out) when every
// one is known for template name with id, nil when one is not. A
// template whose id was not told (id "") is looked up by the id last
// read for its name.
func (c *versionContents) known(name, id string, versions []string, target string) map[int64]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		id = c.ids[name]
	}
	byVersion := c.byTemplate[name+"/"+id]
	out := map[int64]string{}
	for _, v := range versions {
		if v == target {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue // not a version number: never up to date
		}
		key, ok := byVersion[n]
		if !ok {
			return nil
		}
		out[n] = key
	}
	return out
}

// remember records that version of template name (id) carries the
// content key desc (a version the controller just wrote).
func (c *versionContents) remember(name, id string, version int64, desc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byTemplate == nil {
		c.byTemplate, c.ids = map[string]map[int64]string{}, map[string]string{}
	}
	if id == "" {
		id = c.ids[name]
	}
	if c.ids[name] != id {
		delete(c.byTemplate, name+"/"+c.ids[name])
		c.ids[name] = id
	}
	key := name + "/" + id
	if c.byTemplate[key] == nil {
		c.byTemplate[key] = map[int64]string{}
	}
	c.byTemplate[key][version] = desc
}

// newestWith returns the newest remembered version of template name (id)
// that carries the content key desc.
func (c *versionContents) newestWith(name, id, desc string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		id = c.ids[name]
	}
	best := int64(0)
	for v, key := range c.byTemplate[name+"/"+id] {
		if key == desc && v > best {
			best = v
		}
	}
	return best, best > 0
}

// forget drops what was read of template name (the group is deleted).
func (c *versionContents) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.ids[name]; ok {
		delete(c.byTemplate, name+"/"+id)
		delete(c.ids, name)
	}
}

package eksmanaged

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// versionUpdates remembers the id of the last version update sent to each
// node group ("<cluster>/<name>"), so that its outcome is one
// DescribeUpdate; after a restart the node group's updates are listed.
type versionUpdates struct {
	mu   sync.Mutex
	sent map[string]sentUpdate
}

// sentUpdate is a version update sent: its id, and whether with force;
// last is the update as read once it ended (Failed, Cancelled or
// Successful: it changes no more), nil before.
type sentUpdate struct {
	id     string
	forced bool
	last   *ekstypes.Update
}

func (v *versionUpdates) put(key string, u sentUpdate) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sent == nil {
		v.sent = map[string]sentUpdate{}
	}
	v.sent[key] = u
}

func (v *versionUpdates) get(key string) sentUpdate {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.sent[key]
}

// lastVersionUpdate returns the node group's latest version update: the
// one recorded as sent (EKS DescribeUpdate), else the newest VersionUpdate
// among the first page of its updates (ListUpdates, DescribeUpdate of
// each, at most 10); nil when there is none.
func lastVersionUpdate(ctx context.Context, api awsp.EKSAPI, recorded *versionUpdates, cluster, name string) (*ekstypes.Update, error) {
	describe := func(id string) (*ekstypes.Update, error) {
		out, err := api.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: awssdk.String(cluster), NodegroupName: awssdk.String(name), UpdateId: awssdk.String(id)})
		if err != nil {
			return nil, fmt.Errorf("eks DescribeUpdate %s of node group %s (cluster %s): %w", id, name, cluster, err)
		}
		return out.Update, nil
	}
	if u := recorded.get(cluster + "/" + name); u.id != "" {
		if u.last != nil {
			return u.last, nil
		}
		got, err := describe(u.id)
		if err == nil && ended(got) {
			u.last = got
			recorded.put(cluster+"/"+name, u)
		}
		return got, err
	}
	list, err := api.ListUpdates(ctx, &eks.ListUpdatesInput{Name: awssdk.String(cluster), NodegroupName: awssdk.String(name), MaxResults: awssdk.Int32(10)})
	if err != nil {
		return nil, fmt.Errorf("eks ListUpdates of node group %s (cluster %s): %w", name, cluster, err)
	}
	var last *ekstypes.Update
	for _, id := range list.UpdateIds {
		u, err := describe(id)
		if err != nil {
			return nil, err
		}
		if u != nil && u.Type == ekstypes.UpdateTypeVersionUpdate && (last == nil || awssdk.ToTime(u.CreatedAt).After(awssdk.ToTime(last.CreatedAt))) {
			last = u
		}
	}
	if last != nil {
		u := sentUpdate{id: awssdk.ToString(last.Id)} // forced or not: unknown, taken as not
		if ended(last) {
			u.last = last
		}
		recorded.put(cluster+"/"+name, u)
	}
	return last, nil
}

// ended reports whether u has ended: its status changes no more.
func ended(u *ekstypes.Update) bool {
	return u != nil && (u.Status == ekstypes.UpdateStatusFailed || u.Status == ekstypes.UpdateStatusCancelled || u.Status == ekstypes.UpdateStatusSuccessful)
}

// failedAgain returns why in must not be sent: the node group's last
// version update asked for the same (version, releaseVersion, launch
// template version, each as in sets it) and ended Failed or Cancelled,
// with the errors EKS recorded ("" when in may be sent). A spec that asks
// for something else sends it, and so does force (forceVersionUpdate) on
// an update whose last attempt was not forced (lastForced).
func failedAgain(last *ekstypes.Update, lastForced bool, in *eks.UpdateNodegroupVersionInput) string {
	if last == nil || (last.Status != ekstypes.UpdateStatusFailed && last.Status != ekstypes.UpdateStatusCancelled) {
		return ""
	}
	if in.Force && !lastForced {
		return ""
	}
	params := map[ekstypes.UpdateParamType]string{}
	for _, p := range last.Params {
		params[p.Type] = awssdk.ToString(p.Value)
	}
	want := map[ekstypes.UpdateParamType]string{}
	if in.Version != nil {
		want[ekstypes.UpdateParamTypeVersion] = *in.Version
	}
	if in.ReleaseVersion != nil {
		want[ekstypes.UpdateParamTypeReleaseVersion] = *in.ReleaseVersion
	}
	if in.LaunchTemplate != nil {
		want[ekstypes.UpdateParamTypeLaunchTemplateVersion] = awssdk.ToString(in.LaunchTemplate.Version)
	}
	for k, v := range want {
		if got, ok := params[k]; ok && got != v {
			return "" // the spec asks for something else now
		}
	}
	var errs []string
	for _, e := range last.Errors {
		s := string(e.ErrorCode) + ": " + awssdk.ToString(e.ErrorMessage)
		if len(e.ResourceIds) > 0 {
			s += " (" + strings.Join(e.ResourceIds, ", ") + ")"
		}
		errs = append(errs, s)
	}
	sort.Strings(errs)
	if len(errs) == 0 {
		errs = []string{"no error recorded"}
	}
	return fmt.Sprintf("the last version update %s of EKS node group %s %s (%s); it is not sent again until the spec changes (or forceVersionUpdate is set)",
		awssdk.ToString(last.Id), awssdk.ToString(in.NodegroupName), strings.ToLower(string(last.Status)), strings.Join(errs, "; "))
}

// failedUpdate: update did not send a version update because the same one
// failed last time (failedAgain says why).
type failedUpdate struct{ why string }

func (f *failedUpdate) Error() string { return f.why }

package eks

import (
	"context"
	"fmt"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// tagLaunchVersion is the tag EC2 puts on an instance launched from a
// launch template: the version it was launched from.
const tagLaunchVersion = "aws:ec2launchtemplate:version"

// launchedVersions remembers which launch template version each instance
// was launched from (EC2 DescribeInstances, tag aws:ec2launchtemplate:version).
// The answer never changes for an instance, so each is looked up once.
// Drift is judged from it rather than from the Auto Scaling group's view of
// the instance, which an emulator may report as the template's current
// default version.
type launchedVersions struct {
	api awsp.EC2API

	mu   sync.Mutex
	byID map[string]string
}

// lookup returns the launch version of each instance id (ids it cannot
// tell are absent). Errors come from DescribeInstances.
func (l *launchedVersions) lookup(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	var missing []string
	l.mu.Lock()
	for _, id := range ids {
		if v, ok := l.byID[id]; ok {
			out[id] = v
		} else {
			missing = append(missing, id)
		}
	}
	l.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	p := ec2.NewDescribeInstancesPaginator(l.api, &ec2.DescribeInstancesInput{InstanceIds: missing})
	found := map[string]string{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeInstances %v: %w", missing, err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				for _, t := range in.Tags {
					if awssdk.ToString(t.Key) == tagLaunchVersion {
						found[awssdk.ToString(in.InstanceId)] = awssdk.ToString(t.Value)
					}
				}
			}
		}
	}
	l.mu.Lock()
	if l.byID == nil {
		l.byID = map[string]string{}
	}
	for id, v := range found {
		l.byID[id] = v
		out[id] = v
	}
	l.mu.Unlock()
	return out, nil
}

// forget drops instances that are gone.
func (l *launchedVersions) forget(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.byID {
		if !keep[id] {
			delete(l.byID, id)
		}
	}
}

package eks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// activitiesRead is how many of a group's latest scaling activities
// launchFailure reads (one page, newest first).
const activitiesRead = 20

// launchFailure returns the StatusMessage of the group's latest launch
// activity when it Failed, "" when it did not (or there is none). On AWS a
// launch the Auto Scaling group cannot make (InsufficientInstanceCapacity,
// an instance profile not yet usable, a quota) is reported only as a
// scaling activity with StatusCode Failed; the API call that asked for the
// capacity succeeds (Amazon EC2 Auto Scaling User Guide, "Troubleshoot
// Amazon EC2 Auto Scaling: EC2 instance launch failures"). It is one
// DescribeScalingActivities call (MaxRecords activitiesRead), made only for
// a group whose counted instances (launching or in service) are below its
// desired capacity (short); an idle group costs nothing.
func launchFailure(ctx context.Context, api awsp.AutoScalingAPI, name string, desired int, instances []providers.Instance) (string, error) {
	if !short(desired, instances) {
		return "", nil
	}
	out, err := api.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{
		AutoScalingGroupName: awssdk.String(name), MaxRecords: awssdk.Int32(activitiesRead)})
	if err != nil {
		return "", fmt.Errorf("autoscaling DescribeScalingActivities %s: %w", name, err)
	}
	for _, a := range out.Activities {
		if !strings.HasPrefix(awssdk.ToString(a.Description), "Launching a new EC2 instance") {
			continue // terminations, warm pool changes
		}
		if a.StatusCode != astypes.ScalingActivityStatusCodeFailed && a.StatusCode != astypes.ScalingActivityStatusCodeCancelled {
			return "", nil
		}
		if msg := awssdk.ToString(a.StatusMessage); msg != "" {
			return msg, nil
		}
		return awssdk.ToString(a.Description), nil
	}
	return "", nil
}

// launchFailureTTL is how long launchFailures reuses a group's read while
// the group stays short by the same amount: a group that cannot launch is
// reconciled every poll interval (5 s), and DescribeScalingActivities draws
// on the account's Auto Scaling API limits that the cluster-autoscaler
// shares (review 2026-11-29 N7).
const launchFailureTTL = 30 * time.Second

// launchFailures caches launchFailure per Auto Scaling group. The zero
// value is ready; safe for concurrent use.
type launchFailures struct {
	mu      sync.Mutex
	byGroup map[string]launchRead
	now     func() time.Time // tests; default time.Now
}

// launchRead is one launchFailure answer, for the desired capacity and
// instances it was read for (key).
type launchRead struct {
	at       time.Time
	key, msg string
}

// read is launchFailure, reusing the group's last answer for
// launchFailureTTL while its desired capacity and instance count are
// unchanged; a group not short reads nothing and forgets its answer.
func (l *launchFailures) read(ctx context.Context, api awsp.AutoScalingAPI, name string, desired int, instances []providers.Instance) (string, error) {
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	l.mu.Lock()
	if l.byGroup == nil {
		l.byGroup = map[string]launchRead{}
	}
	if !short(desired, instances) {
		delete(l.byGroup, name)
		l.mu.Unlock()
		return "", nil
	}
	key := fmt.Sprint(desired, "/", len(instances))
	if r, ok := l.byGroup[name]; ok && r.key == key && now().Sub(r.at) < launchFailureTTL {
		l.mu.Unlock()
		return r.msg, nil
	}
	l.mu.Unlock()
	msg, err := launchFailure(ctx, api, name, desired, instances)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	l.byGroup[name] = launchRead{at: now(), key: key, msg: msg}
	l.mu.Unlock()
	return msg, nil
}

// short reports whether the capacity units of the instances counted toward
// the desired capacity (Pending*, InService) fall below desired: the Auto
// Scaling group has not (yet) launched what it was asked for.
func short(desired int, instances []providers.Instance) bool {
	counted := providers.Capacity(instances, func(in providers.Instance) bool {
		return in.InService() || strings.HasPrefix(in.LifecycleState, "Pending")
	})
	return counted < desired
}

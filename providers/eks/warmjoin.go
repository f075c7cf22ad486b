package eks

import (
	"fmt"
	"strings"
)

// Warm pools and the bootstrap.
//
// Auto Scaling launches a warm pool's instances, then stops (or
// hibernates, or keeps running) them as soon as they are running, without
// waiting for user data; cloud-init runs user data on the first boot only
// (Amazon EC2 Auto Scaling User Guide, "Use lifecycle hooks with a warm
// pool": instances can reach InService without finishing their bootstrap).
// A node that joined while warming would be a NotReady Node for as long as
// its instance sits in the pool; one stopped mid-bootstrap would never
// join. So a group with a warm pool gets user data that joins only when
// the instance metadata item autoscaling/target-lifecycle-state reads
// InService, and that runs again on every boot until it has: Auto Scaling
// starts a stopped warm instance when it puts it in service.

// warmJoinScript is where the join script of a warm-pool group's instance
// lives: cloud-init runs scripts-per-boot on every boot (before the
// per-instance user data, so the first boot runs it from the user data).
const warmJoinScript = "/var/lib/cloud/scripts/per-boot/instance-manager-join.sh"

// warmJoinDone marks an instance whose join ran to its end: later boots
// (a reboot, a stop and start) do not format volumes or join again.
const warmJoinDone = "/var/lib/instance-manager/joined"

// warmWaitUnknown bounds, in 5-second polls, how long the join waits while
// the instance metadata does not answer with a lifecycle state at all
// (10 minutes): a node that cannot read it joins rather than never.
// Warmed:* states are waited out without a bound.
const warmWaitUnknown = 120

// WarmPoolWindowsRefusal says why a Windows group cannot have a warm pool
// (admission and Apply refuse it with this message).
const WarmPoolWindowsRefusal = "a warm pool needs a bootstrap that waits until Auto Scaling puts the instance in service " +
	"(instance metadata autoscaling/target-lifecycle-state); the Windows bootstrap (Start-EKSBootstrap.ps1) does not, " +
	"so its nodes would join while warming and be stopped mid-boot; use an amazonlinux2, amazonlinux2023 or bottlerocket group"

// warmJoin returns shell (bash) that installs body as the per-boot join
// script and runs it: the script returns at once when an earlier boot
// finished it; otherwise it waits until the target lifecycle state is
// InService (IMDSv2), runs body, and marks the join done. body is
// embedded verbatim in a quoted here-document whose delimiter does not
// occur in it.
func warmJoin(body string) string {
	delim := "IM_JOIN"
	for n := 0; strings.Contains(body, delim); n++ {
		delim = fmt.Sprintf("IM_JOIN_%d", n)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "mkdir -p %s\ncat > %s <<'%s'\n", "/var/lib/cloud/scripts/per-boot", warmJoinScript, delim)
	fmt.Fprintf(&sb, `#!/bin/bash
set -o xtrace
[ -e %[1]s ] && exit 0
# Join only once Auto Scaling puts this instance in service: not while it
# warms in the warm pool (Warmed:Stopped, Warmed:Running, Warmed:Hibernated).
target_state() {
  token=$(curl -sf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' http://169.254.169.254/latest/api/token) || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" http://169.254.169.254/latest/meta-data/autoscaling/target-lifecycle-state
}
unknown=0
while :; do
  state=$(target_state) || state=
  case "$state" in
    InService) break ;;
    Warmed:*) unknown=0 ;;
    *) unknown=$((unknown + 1)); [ "$unknown" -ge %[2]d ] && break ;;
  esac
  sleep 5
done
`, warmJoinDone, warmWaitUnknown)
	sb.WriteString(strings.TrimRight(body, "\n") + "\n")
	fmt.Fprintf(&sb, "mkdir -p %s && touch %s\n%s\nchmod 0755 %s\n%s\n", "/var/lib/instance-manager", warmJoinDone, delim, warmJoinScript, warmJoinScript)
	return sb.String()
}

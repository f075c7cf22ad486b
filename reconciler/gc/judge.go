package gc

import (
	"fmt"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// orphaned returns why r, listed by col, is an orphan given live, the
// InstanceGroup its tags name as found now (nil when it does not exist),
// or "" when it is not. Only what this installation made is ever judged
// (ownership.Recorded on r's tags). A group being deleted is not judged:
// its finalizer deletes what it owns. Otherwise the provisioner that made
// r says whether live still builds it (Collector.Builds: another
// provisioner, cluster or name; a group deleted and created again under
// the same name adopts what it can, and only that is kept).
func orphaned(col providers.Collector, r providers.Owned, live *v1alpha1.InstanceGroup) string {
	o, ok := ownership.Recorded(r.Tags)
	switch {
	case !ok || o != r.Owner || col == nil:
		return ""
	case live == nil:
		return fmt.Sprintf("InstanceGroup %s no longer exists", o)
	case live.DeletionTimestamp != nil:
		return ""
	}
	return col.Builds(live, r)
}

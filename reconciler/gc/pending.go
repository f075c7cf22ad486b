package gc

import (
	"context"
	"encoding/json"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// PendingLeaseName is the Lease, in the namespace of the upgrade slot
// Leases (the leader election Lease's), that holds the owners whose
// leftovers the GC still has to delete: the chart's RBAC already lets the
// controller create, get and update Leases there, and the record must
// outlive the process (review 2026-11-29 N9: a restart or a leader
// change between an Auto Scaling group's deletion and FinishOrphan leaked
// the node role, its instance profile, the aws-auth mapping and the EKS
// access entry, which no listing by tag finds again).
const PendingLeaseName = "instance-manager-gc-pending"

// AnnotationPending is the Lease annotation holding the pending owners:
// JSON, an object of "<collector>/<cluster>/<namespace>/<name>/<uid>" to
// the owner.
const AnnotationPending = "instancemgr.keikoproj.io/gc-pending"

// Pending keeps the GC's pending owners in the Lease PendingLeaseName.
type Pending struct {
	// Client writes the Lease; Reader reads it uncached (the GC runs
	// every few minutes and must see what an earlier leader wrote).
	Client    client.Client
	Reader    client.Reader
	Namespace string
}

// Load returns the owners recorded, none when the Lease does not exist.
// Errors name the Lease.
func (p *Pending) Load(ctx context.Context) (map[string]ownership.Owner, error) {
	l := &coordinationv1.Lease{}
	err := p.Reader.Get(ctx, p.key(), l)
	if apierrors.IsNotFound(err) {
		return map[string]ownership.Owner{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the GC's pending owners (Lease %s): %w", p.key(), err)
	}
	return decodePending(l.Annotations[AnnotationPending], p.key())
}

// Save writes owners as the Lease's record, creating the Lease when it
// does not exist. A conflict (another leader wrote it) is an error: the
// sweep is retried next period.
func (p *Pending) Save(ctx context.Context, owners map[string]ownership.Owner) error {
	data, err := json.Marshal(owners)
	if err != nil {
		return err
	}
	l := &coordinationv1.Lease{}
	err = p.Reader.Get(ctx, p.key(), l)
	switch {
	case apierrors.IsNotFound(err):
		l.Namespace, l.Name = p.Namespace, PendingLeaseName
		l.Annotations = map[string]string{AnnotationPending: string(data)}
		err = p.Client.Create(ctx, l)
	case err == nil:
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationPending] = string(data)
		err = p.Client.Update(ctx, l)
	}
	if err != nil {
		return fmt.Errorf("recording the GC's pending owners (Lease %s): %w", p.key(), err)
	}
	return nil
}

func (p *Pending) key() types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: PendingLeaseName}
}

func decodePending(s string, key types.NamespacedName) (map[string]ownership.Owner, error) {
	out := map[string]ownership.Owner{}
	if s == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("annotation %s of Lease %s is not a JSON object of owners: %w", AnnotationPending, key, err)
	}
	return out, nil
}

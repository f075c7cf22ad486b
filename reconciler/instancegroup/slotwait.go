package instancegroup

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/instancemgr/instance-manager/reconciler/slots"
)

// DefaultWaitingInterval is how often a group waiting for an upgrade slot
// or a maintenance window is re-checked when nothing wakes it: a slot
// freed by this controller wakes the waiting groups at once (wakingSlots),
// so polling them every PollInterval would only spend API calls (review
// 2026-11-29 N7: eks-managed groups read EKS, eks groups their cached
// listing, at every pass).
const DefaultWaitingInterval = 30 * time.Second

// slotWaiters are the groups whose last report was waiting for a slot or
// a window; wake enqueues them all (a Reconciler's channel source).
type slotWaiters struct {
	mu      sync.Mutex
	waiting map[types.NamespacedName]bool
	ch      chan event.TypedGenericEvent[types.NamespacedName]
}

func newSlotWaiters() *slotWaiters {
	return &slotWaiters{waiting: map[types.NamespacedName]bool{}, ch: make(chan event.TypedGenericEvent[types.NamespacedName], 1024)}
}

// set records whether key waits; nil-safe (a Reconciler not set up with a
// manager: tests).
func (w *slotWaiters) set(key types.NamespacedName, waiting bool) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if waiting {
		w.waiting[key] = true
	} else {
		delete(w.waiting, key)
	}
}

// wake enqueues every waiting group; a full queue drops the rest (their
// requeue after the waiting interval still comes).
func (w *slotWaiters) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key := range w.waiting {
		select {
		case w.ch <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
		default:
			return
		}
	}
}

// wakingSlots is a slots.Keeper whose successful Release wakes the groups
// waiting for a slot.
type wakingSlots struct {
	slots.Keeper
	waiters *slotWaiters
}

// Release implements slots.Keeper.
func (s wakingSlots) Release(ctx context.Context, key types.NamespacedName, reason slots.Reason) error {
	if err := s.Keeper.Release(ctx, key, reason); err != nil {
		return err
	}
	s.waiters.wake()
	return nil
}

// waitingRequeue is the requeue of a group that waits for a slot or a
// window: WaitingInterval, never shorter than PollInterval.
func (r *Reconciler) waitingRequeue() time.Duration {
	return max(r.WaitingInterval, r.PollInterval)
}

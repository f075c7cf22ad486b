package slots

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Upgrade slot Leases: names, label and annotations.
const (
	// LeasePrefix starts the name of every upgrade slot Lease; the
	// slot's index (0, 1, …) ends it.
	LeasePrefix = "instance-manager-upgrade-slot-"
	// Label ("true") marks the upgrade slot Leases, so they are listed
	// by label.
	Label = "instancemgr.keikoproj.io/upgrade-slot"
	// AnnotationProgress is the holder's rotation progress as last seen
	// ("<updated> updated, <drifted> drifted"); spec.renewTime is when it
	// last changed.
	AnnotationProgress = "instancemgr.keikoproj.io/upgrade-progress"
	// AnnotationGroupUID is the UID of the holding InstanceGroup, so a
	// slot left by a deleted group is not taken over by a new group of the
	// same name.
	AnnotationGroupUID = "instancemgr.keikoproj.io/group-uid"
)

// Keeper caps how many InstanceGroups rotate nodes at once and tracks
// each holder's progress. Leases keeps the slots in the API server;
// Slots in memory.
type Keeper interface {
	// Acquire returns true if the group key (with UID uid) holds a slot,
	// already or now; false when the cap or its namespace's quota is
	// reached. Errors come from the API server.
	Acquire(ctx context.Context, key types.NamespacedName, uid types.UID) (bool, error)
	// Release frees key's slot, if it holds one, for reason (counted
	// and logged by the production keeper). Errors come from the API
	// server.
	Release(ctx context.Context, key types.NamespacedName, reason Reason) error
	// Holders returns the groups holding slots, sorted, as last read.
	Holders() []types.NamespacedName
	// Progress records marker as the holder key's progress and returns
	// when it last changed (now for a group that holds no slot).
	Progress(ctx context.Context, key types.NamespacedName, marker string) (time.Time, error)
	// LastProgress returns when the holder key's progress last changed;
	// false if key holds no slot.
	LastProgress(ctx context.Context, key types.NamespacedName) (time.Time, bool, error)
}

// Leases keeps the upgrade slots as coordination.k8s.io/v1 Leases in
// Namespace, one per held slot, named LeasePrefix+<index> and labelled
// Label=true: spec.holderIdentity is the group's "<namespace>/<name>",
// spec.acquireTime when it took the slot, spec.renewTime when its progress
// (AnnotationProgress) last changed, spec.leaseDurationSeconds the
// stall timeout. A slot is taken by creating its Lease (AlreadyExists: it
// is someone else's) and freed by deleting it with a resourceVersion
// precondition, so a restarted or newly elected controller continues with
// the slots as they were, and two writers never both win a slot.
//
// Only the elected controller writes the Leases; it keeps a copy of them,
// read again from the API server (Reader, not a cache) every Resync and
// after any conflict. Safe for concurrent use.
type Leases struct {
	// Client writes the Leases; Reader lists them and reads the holders'
	// InstanceGroups (the manager's API reader).
	Client client.Client
	Reader client.Reader
	// Namespace holds the Leases (the manager's namespace).
	Namespace string
	// Max returns the current cap; 0 or less means no cap.
	Max func() int
	// PerNamespace, if set, returns the cap on slots the groups of one
	// namespace hold at once; 0 or less means no cap.
	PerNamespace func(namespace string) int
	// StallTimeout is written as the Leases' leaseDurationSeconds (0:
	// none): how long a holder may go without progress.
	StallTimeout time.Duration
	// Resync is how long the copy of the Leases is trusted (default 30s).
	Resync time.Duration
	// Now returns the current time (tests); default time.Now.
	Now func() time.Time

	mu       sync.Mutex
	leases   map[string]*coordinationv1.Lease // by name; nil: read again
	loadedAt time.Time
	reapedAt time.Time
}

var _ Keeper = &Leases{}

// Acquire implements Keeper. A group that holds a Lease keeps it; a
// Lease whose InstanceGroup is gone (or is another group of the same name)
// is deleted before the cap is judged, when the cap is reached.
func (s *Leases) Acquire(ctx context.Context, key types.NamespacedName, uid types.UID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		return false, err
	}
	if l := s.held(key); l != nil {
		if got := l.Annotations[AnnotationGroupUID]; uid == "" || got == "" || got == string(uid) {
			return true, nil
		}
		// A group of the same name held it and was deleted.
		if err := s.deleteLease(ctx, l); err != nil || s.leases == nil {
			return false, err // nil: changed meanwhile, judged again at the next pass
		}
	}
	if s.full(key.Namespace) && s.now().Sub(s.reapedAt) >= s.resync() {
		s.reapedAt = s.now()
		if err := s.reap(ctx); err != nil || s.leases == nil {
			return false, err
		}
	}
	if s.full(key.Namespace) {
		return false, nil
	}
	name := s.freeName()
	now := metav1.NewMicroTime(s.now())
	holder := key.String()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace, Name: name,
			Labels:      map[string]string{Label: "true"},
			Annotations: map[string]string{AnnotationGroupUID: string(uid)},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now, RenewTime: &now},
	}
	if secs := int32(s.StallTimeout / time.Second); secs > 0 {
		l.Spec.LeaseDurationSeconds = &secs
	}
	if err := s.Client.Create(ctx, l); err != nil {
		if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
			s.leases = nil // another writer: read again, try at the next pass
			return false, nil
		}
		return false, fmt.Errorf("creating upgrade slot Lease %s/%s for InstanceGroup %s: %w", s.Namespace, name, key, err)
	}
	s.leases[name] = l
	return true, nil
}

// Release implements Keeper: it deletes every Lease key holds and, when
// there was one, counts the release by reason
// (instance_manager_upgrade_slot_releases_total) and logs it.
func (s *Leases) Release(ctx context.Context, key types.NamespacedName, reason Reason) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		return err
	}
	var released []string
	for l := s.held(key); l != nil; l = s.held(key) {
		if err := s.deleteLease(ctx, l); err != nil {
			return err
		}
		if s.leases != nil {
			released = append(released, l.Name)
			continue
		}
		// Changed meanwhile: read again.
		if err := s.load(ctx); err != nil {
			return err
		}
	}
	if len(released) > 0 {
		releases.WithLabelValues(string(reason)).Inc()
		log.FromContext(ctx).Info("upgrade slot released", "group", key, "reason", reason, "leases", released)
	}
	return nil
}

// Holders implements Keeper, from the copy last read.
func (s *Leases) Holders() []types.NamespacedName {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(s.leases))
	for _, l := range s.leases {
		if k, ok := holderKey(l); ok {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Progress implements Keeper: a new marker is written to the Lease
// (AnnotationProgress, spec.renewTime = now) with its resourceVersion.
func (s *Leases) Progress(ctx context.Context, key types.NamespacedName, marker string) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		return s.now(), err
	}
	l := s.held(key)
	if l == nil {
		return s.now(), nil
	}
	_, seen := l.Annotations[AnnotationProgress]
	if seen && l.Annotations[AnnotationProgress] == marker && l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time, nil
	}
	upd := l.DeepCopy()
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[AnnotationProgress] = marker
	now := metav1.NewMicroTime(s.now())
	upd.Spec.RenewTime = &now
	if err := s.Client.Update(ctx, upd); err != nil {
		s.leases = nil
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return s.now(), nil // changed meanwhile: judged again at the next pass
		}
		return s.now(), fmt.Errorf("recording the progress of InstanceGroup %s in upgrade slot Lease %s/%s: %w", key, s.Namespace, l.Name, err)
	}
	s.leases[upd.Name] = upd
	return now.Time, nil
}

// LastProgress implements Keeper: the Lease's spec.renewTime.
func (s *Leases) LastProgress(ctx context.Context, key types.NamespacedName) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx); err != nil {
		return time.Time{}, false, err
	}
	l := s.held(key)
	if l == nil || l.Spec.RenewTime == nil {
		return time.Time{}, l != nil, nil
	}
	return l.Spec.RenewTime.Time, true, nil
}

// load reads the slot Leases when the copy is missing or older than Resync.
func (s *Leases) load(ctx context.Context) error {
	if s.leases != nil && s.now().Sub(s.loadedAt) < s.resync() {
		return nil
	}
	list := &coordinationv1.LeaseList{}
	if err := s.Reader.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{Label: "true"}); err != nil {
		return fmt.Errorf("listing the upgrade slot Leases in namespace %s (label %s=true): %w", s.Namespace, Label, err)
	}
	s.leases = make(map[string]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		s.leases[list.Items[i].Name] = &list.Items[i]
	}
	s.loadedAt = s.now()
	return nil
}

// reap deletes the Leases whose InstanceGroup is gone or was replaced by
// another of the same name (the finalizer's release was missed, e.g. the
// finalizer was removed by hand), and those without a holder.
func (s *Leases) reap(ctx context.Context) error {
	for _, l := range s.sorted() {
		key, ok := holderKey(l)
		if ok {
			ig := &v1alpha1.InstanceGroup{}
			err := s.Reader.Get(ctx, key, ig)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("reading InstanceGroup %s, holder of upgrade slot Lease %s/%s: %w", key, s.Namespace, l.Name, err)
			case l.Annotations[AnnotationGroupUID] == "" || l.Annotations[AnnotationGroupUID] == string(ig.UID):
				continue
			}
		}
		if err := s.deleteLease(ctx, l); err != nil {
			return err
		}
		if s.leases == nil {
			return s.load(ctx)
		}
	}
	return nil
}

// deleteLease deletes l if unchanged since read; a conflict makes the
// copy be read again.
func (s *Leases) deleteLease(ctx context.Context, l *coordinationv1.Lease) error {
	err := s.Client.Delete(ctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		delete(s.leases, l.Name)
		return nil
	case apierrors.IsConflict(err):
		s.leases = nil
		return nil
	}
	return fmt.Errorf("deleting upgrade slot Lease %s/%s: %w", s.Namespace, l.Name, err)
}

// full reports whether the cap, or namespace's quota, is reached.
func (s *Leases) full(namespace string) bool {
	held := make([]types.NamespacedName, 0, len(s.leases))
	for _, l := range s.leases {
		if k, ok := holderKey(l); ok {
			held = append(held, k)
		} else {
			held = append(held, types.NamespacedName{}) // counts against the cap only
		}
	}
	return Full(held, namespace, s.Max, s.PerNamespace)
}

// held returns the Lease key holds, if any.
func (s *Leases) held(key types.NamespacedName) *coordinationv1.Lease {
	for _, l := range s.sorted() {
		if k, ok := holderKey(l); ok && k == key {
			return l
		}
	}
	return nil
}

// freeName is the name of the lowest slot index without a Lease.
func (s *Leases) freeName() string {
	for i := 0; ; i++ {
		name := LeasePrefix + strconv.Itoa(i)
		if _, ok := s.leases[name]; !ok {
			return name
		}
	}
}

func (s *Leases) sorted() []*coordinationv1.Lease {
	out := make([]*coordinationv1.Lease, 0, len(s.leases))
	for _, l := range s.leases {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Leases) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Leases) resync() time.Duration {
	if s.Resync > 0 {
		return s.Resync
	}
	return 30 * time.Second
}

// holderKey parses a Lease's holderIdentity "<namespace>/<name>".
func holderKey(l *coordinationv1.Lease) (types.NamespacedName, bool) {
	if l.Spec.HolderIdentity == nil {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(*l.Spec.HolderIdentity, "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

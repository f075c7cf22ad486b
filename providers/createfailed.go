package providers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// ReasonCreateFailed: an EKS node group or Fargate profile ended in
// CREATE_FAILED; it is deleted and created again with backoff
// (CreateFailures), and the Event carries the health issues EKS reports.
const ReasonCreateFailed = "CreateFailed"

// CreateFailures paces the re-creation of cloud resources that ended in
// CREATE_FAILED (EKS node groups, Fargate profiles: EKS never retries
// them): each failed incarnation of a resource, told apart by its creation
// time, waits a backoff before it is deleted to be created again, doubling
// from Base up to Max per consecutive failure. The zero value is ready
// (Base 30 s, Max 15 min). It keeps nothing itself: the count lives in the
// group's status (v1alpha1.CreateFailure, status.createFailure), read back
// on every Apply, so a restarted controller or a new leader continues it.
type CreateFailures struct {
	Base, Max time.Duration
	Now       func() time.Time
}

// Observe records that the resource name created at createdAt is in
// CREATE_FAILED, given the group's stored record (nil: none). It returns
// the record to store (Observation.CreateFailure), first true the first
// time this incarnation is seen (say so then, once), and wait, how long to
// leave it before deleting it (0: now). The record's Attempts counts the
// failed incarnations in a row, this one included; a record of another
// resource name starts the count again. createdAt is compared at second
// precision, what the status keeps.
func (c CreateFailures) Observe(stored *v1alpha1.CreateFailure, name string, createdAt time.Time) (rec *v1alpha1.CreateFailure, first bool, wait time.Duration) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	base, ceiling := c.Base, c.Max
	if base <= 0 {
		base = 30 * time.Second
	}
	if ceiling <= 0 {
		ceiling = 15 * time.Minute
	}
	createdAt = createdAt.Truncate(time.Second)
	rec = &v1alpha1.CreateFailure{Name: name}
	if stored != nil && stored.Name == name {
		rec = stored.DeepCopy()
	}
	if rec.Attempts == 0 || !rec.CreatedAt.Time.Equal(createdAt) {
		rec.CreatedAt, rec.Since, rec.Attempts, first = metav1.NewTime(createdAt), metav1.NewTime(now().Truncate(time.Second)), rec.Attempts+1, true
	}
	backoff := base
	for i := 1; i < rec.Attempts && backoff < ceiling; i++ {
		backoff *= 2
	}
	backoff = min(backoff, ceiling)
	return rec, first, max(0, rec.Since.Add(backoff).Sub(now()))
}

package instancegroup

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// recommendationTTL is how long a recommendation is fresh; without a
// fresh one the group keeps the last recommendation it followed.
const recommendationTTL = time.Hour

type spotRecommendation struct {
	APIVersion string `json:"apiVersion"`
	SpotPrice  string `json:"spotPrice"`
	UseSpot    bool   `json:"useSpot"`
}

// applySpotRecommendation follows the newest spot recommendation Event from
// the configured recommender (SpotRecommender; a past or present timestamp,
// a decimal price) for the group's Auto Scaling group (in the group's
// namespace) when the spec
// sets no spotPrice of its own: useSpot true runs spot at the recommended
// price, false runs on-demand. The recommendation in force is kept in
// status (usingSpotRecommendation, spotRecommendationPrice) and applied to
// the in-memory spec for the provisioner; the stored spec never changes.
// With no fresh recommendation (older than an hour) the last one stays.
// Errors come from listing Events.
func (r *Reconciler) applySpotRecommendation(ctx context.Context, ig *v1alpha1.InstanceGroup) error {
	eks := ig.Spec.EKS
	if eks == nil || eks.Configuration == nil || eks.Configuration.SpotPrice != "" || eks.Configuration.MixedInstancesPolicy != nil {
		ig.Status.UsingSpotRecommendation, ig.Status.SpotRecommendationPrice = false, ""
		return nil
	}
	if ig.Status.ActiveScalingGroupName != "" && r.Reader != nil {
		list := &corev1.EventList{}
		err := r.Reader.List(ctx, list, client.InNamespace(ig.Namespace), client.MatchingFieldsSelector{
			Selector: fields.AndSelectors(
				fields.OneTermEqualSelector("reason", ReasonSpotRecommendation),
				fields.OneTermEqualSelector("involvedObject.name", ig.Status.ActiveScalingGroupName)),
		})
		if err != nil {
			return fmt.Errorf("listing spot recommendation Events for %s: %w", ig.Status.ActiveScalingGroupName, err)
		}
		sort.Slice(list.Items, func(i, j int) bool { return eventTime(&list.Items[i]).After(eventTime(&list.Items[j])) })
		for _, e := range list.Items {
			if !r.fromSpotRecommender(&e) {
				continue // only the configured recommender is honoured
			}
			if age := time.Since(eventTime(&e)); age > recommendationTTL {
				break
			} else if age < -time.Minute {
				continue // future-dated: would never go stale
			}
			var rec spotRecommendation
			if err := json.Unmarshal([]byte(e.Message), &rec); err != nil || (rec.UseSpot && !validSpotPrice.MatchString(rec.SpotPrice)) {
				continue // not a recommendation we understand
			}
			ig.Status.UsingSpotRecommendation = true
			ig.Status.SpotRecommendationPrice = ""
			if rec.UseSpot {
				ig.Status.SpotRecommendationPrice = rec.SpotPrice
			}
			break
		}
	}
	if ig.Status.UsingSpotRecommendation {
		eks.Configuration.SpotPrice = ig.Status.SpotRecommendationPrice
	}
	return nil
}

var validSpotPrice = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,8})?$`)

// fromSpotRecommender reports whether e was reported by the configured
// recommender (SpotRecommender, matched against source.component and
// reportingComponent); with none configured, no Event is honoured.
func (r *Reconciler) fromSpotRecommender(e *corev1.Event) bool {
	return r.SpotRecommender != "" && (e.Source.Component == r.SpotRecommender || e.ReportingController == r.SpotRecommender)
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

package interruption

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is what a queue message announces.
type Kind string

// The kinds of message the queue carries (the EventBridge rules of the
// setup in docs/autoscaling.md, "Interruption queue", send these four
// detail-types). KindOther is a valid
// EventBridge event of another detail-type: deleted, nothing done.
const (
	KindLifecycle   Kind = "lifecycle_terminate"
	KindSpot        Kind = "spot_interruption"
	KindRebalance   Kind = "rebalance_recommendation"
	KindStateChange Kind = "state_change"
	KindOther       Kind = "other"
)

// EventBridge detail-types and sources of the four kinds (Amazon EC2 Auto
// Scaling User Guide, "Amazon EventBridge events for Amazon EC2 Auto
// Scaling"; Amazon EC2 User Guide, "Spot Instance interruption notices",
// "EC2 instance rebalance recommendations", "Events for Amazon EC2").
const (
	SourceAutoScaling = "aws.autoscaling"
	SourceEC2         = "aws.ec2"

	DetailLifecycleTerminate = "EC2 Instance-terminate Lifecycle Action"
	DetailSpotInterruption   = "EC2 Spot Instance Interruption Warning"
	DetailRebalance          = "EC2 Instance Rebalance Recommendation"
	DetailStateChange        = "EC2 Instance State-change Notification"
)

// Event is one parsed queue message.
type Event struct {
	Kind Kind
	// ID is the EventBridge event id; DetailType and Source as sent.
	ID, DetailType, Source string
	// InstanceID is the EC2 instance the event is about.
	InstanceID string
	// ScalingGroup, Hook, Token and Transition: the lifecycle action
	// (KindLifecycle).
	ScalingGroup, Hook, Token, Transition string
	// Action is the spot interruption's instance-action (terminate, stop,
	// hibernate); State the new instance state (KindStateChange).
	Action, State string
}

// envelope is the EventBridge event structure (Amazon EventBridge User
// Guide, "Amazon EventBridge events": version, id, detail-type, source,
// account, time, region, resources, detail).
type envelope struct {
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Detail     json.RawMessage `json:"detail"`
}

// lifecycleDetail is the detail of "EC2 Instance-terminate Lifecycle
// Action".
type lifecycleDetail struct {
	Token        string `json:"LifecycleActionToken"`
	ScalingGroup string `json:"AutoScalingGroupName"`
	Hook         string `json:"LifecycleHookName"`
	InstanceID   string `json:"EC2InstanceId"`
	Transition   string `json:"LifecycleTransition"`
}

// ec2Detail is the detail of the three EC2 events: instance-id, and
// instance-action (spot) or state (state-change).
type ec2Detail struct {
	InstanceID string `json:"instance-id"`
	Action     string `json:"instance-action"`
	State      string `json:"state"`
}

// Parse reads a queue message body: an EventBridge event as an SQS rule
// target receives it (the event JSON itself). Errors name what is
// missing or malformed; such a message is deleted (it can never be
// handled).
func Parse(body string) (Event, error) {
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Event{}, fmt.Errorf("not an EventBridge event (JSON object with detail-type, source, detail): %w", err)
	}
	if env.DetailType == "" || env.Source == "" {
		return Event{}, fmt.Errorf("not an EventBridge event: %q and %q must be set", "detail-type", "source")
	}
	ev := Event{Kind: KindOther, ID: env.ID, DetailType: env.DetailType, Source: env.Source}
	switch {
	case env.Source == SourceAutoScaling && env.DetailType == DetailLifecycleTerminate:
		var d lifecycleDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Event{}, fmt.Errorf("%s event %s: detail: %w", env.DetailType, env.ID, err)
		}
		if d.ScalingGroup == "" || d.Hook == "" || !strings.HasPrefix(d.InstanceID, "i-") {
			return Event{}, fmt.Errorf("%s event %s: detail.AutoScalingGroupName, detail.LifecycleHookName and detail.EC2InstanceId (i-...) must be set, got %q, %q, %q",
				env.DetailType, env.ID, d.ScalingGroup, d.Hook, d.InstanceID)
		}
		ev.Kind, ev.InstanceID, ev.ScalingGroup, ev.Hook, ev.Token, ev.Transition = KindLifecycle, d.InstanceID, d.ScalingGroup, d.Hook, d.Token, d.Transition
	case env.Source == SourceEC2 && (env.DetailType == DetailSpotInterruption || env.DetailType == DetailRebalance || env.DetailType == DetailStateChange):
		var d ec2Detail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Event{}, fmt.Errorf("%s event %s: detail: %w", env.DetailType, env.ID, err)
		}
		if !strings.HasPrefix(d.InstanceID, "i-") {
			return Event{}, fmt.Errorf("%s event %s: detail.instance-id must be an EC2 instance id (i-...), got %q", env.DetailType, env.ID, d.InstanceID)
		}
		ev.InstanceID, ev.Action, ev.State = d.InstanceID, d.Action, d.State
		switch env.DetailType {
		case DetailSpotInterruption:
			ev.Kind = KindSpot
		case DetailRebalance:
			ev.Kind = KindRebalance
		default:
			if d.State == "" {
				return Event{}, fmt.Errorf("%s event %s: detail.state must be set", env.DetailType, env.ID)
			}
			ev.Kind = KindStateChange
		}
	}
	return ev, nil
}

// leaving reports whether an instance state (state-change notification)
// means the instance is going away or stopping: its node must drain.
func leaving(state string) bool {
	switch state {
	case "shutting-down", "stopping", "terminated":
		return true
	}
	return false
}

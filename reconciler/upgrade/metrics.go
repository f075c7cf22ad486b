package upgrade

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Counters of the rolling update's batch judgement.
var (
	// replacementsForgone counts capacity units of replacements a batch
	// stopped waiting for (ReasonReplacementForgone).
	replacementsForgone = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "instance_manager_rotation_replacements_forgone_total",
		Help: "Capacity units of replacements a rotation batch stopped waiting for because Auto Scaling will not launch them (a replacement that never joined left the group, which holds its lowered desired capacity with nothing launching).",
	})
	// terminationsHeld counts ReasonTerminationHeld Warnings.
	terminationsHeld = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "instance_manager_rotation_terminations_held_total",
		Help: "Instances the rotation drained and terminated that stayed in Terminating:Wait longer than 10 minutes (a terminate lifecycle hook other than the controller's drain hook holds them).",
	})
)

func init() { metrics.Registry.MustRegister(replacementsForgone, terminationsHeld) }

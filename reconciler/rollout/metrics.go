package rollout

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/boundaries/record"
)

var (
	// phase is 1 for the rollout's current phase, 0 for the others.
	phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_phase",
		Help: "1 for the phase the boundaries rollout is in (Progressing, Halted, RolledBack, Complete), 0 for the others.",
	}, []string{"phase"})
	// wave is the 1-based number of the current wave; 0 when none runs.
	wave = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_wave",
		Help: "Number (from 1) of the boundaries rollout's current wave; 0 when the rollout is Complete.",
	})
	// groups counts the rollout's groups by state.
	groups = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_groups",
		Help: "InstanceGroups of the boundaries rollout by state: done (on the target revision and healthy), failed, waiting.",
	}, []string{"state"})
	// halts counts halted rollouts by the criterion the first failed group met.
	halts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "instance_manager_boundaries_rollout_halts_total",
		Help: "Boundaries rollouts halted, by reason: group_error, startup_timeout, unhealthy_nodes, rejected, pods_not_ready, container_restarts.",
	}, []string{"reason"})
	// nextPlanned is the next wave's plan: its groups and nodes.
	nextPlanned = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_next_wave_planned",
		Help: "The plan of the boundaries rollout's next wave not started: its planned InstanceGroups (unit groups) and their nodes (unit nodes); 0 when no wave is left.",
	}, []string{"unit"})
	// tenantGroups counts the groups whose tenant chose their time.
	tenantGroups = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_tenant_groups",
		Help: "InstanceGroups of the boundaries rollout whose tenant chose their time (annotation instancemgr.keikoproj.io/rollout): early (moved ahead of their wave), late (moved after a deferral), deferred (kept out of their wave for now), failed (early or late groups that failed, judged alone).",
	}, []string{"choice"})
	// failedPods is how many pods failed the workload criteria in the halt.
	failedPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_failed_pods",
		Help: "Pods (of Deployments and StatefulSets on the moved groups' new nodes) that failed the boundaries rollout's workload criteria (podNotReadyAfter, maxContainerRestarts) in the halt in force; 0 when not halted on them.",
	})
	// podLists counts the node pod Lists the workload criteria made (their
	// cost on the API server).
	podLists = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "instance_manager_boundaries_rollout_pod_lists_total",
		Help: "Pod Lists by spec.nodeName the boundaries rollout made to judge the moved groups' new nodes by the workload criteria (at most 20 a second).",
	})
	// recordFailing is 1 while the rollout record cannot be written.
	recordFailing = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "instance_manager_boundaries_rollout_record_write_failing",
		Help: "1 while the boundaries rollout record cannot be written (too large for a ConfigMap, or refused): the rollout cannot move; 0 otherwise.",
	})
)

func init() {
	metrics.Registry.MustRegister(phase, wave, groups, halts, nextPlanned, tenantGroups, recordFailing, failedPods, podLists)
}

// observe sets the gauges from the record and counts a halt among notes.
func observe(rec *record.Record, notes []Note) {
	for _, p := range []string{record.PhaseProgressing, record.PhaseHalted, record.PhaseRolledBack, record.PhaseComplete} {
		v := 0.0
		if rec.Phase == p {
			v = 1
		}
		phase.WithLabelValues(p).Set(v)
	}
	if rec.Phase == record.PhaseComplete {
		wave.Set(0)
	} else {
		wave.Set(float64(rec.Wave + 1))
	}
	planned, nodes := 0, 0
	if next := rec.Wave + 1; rec.Phase != record.PhaseComplete && next < len(rec.Waves) {
		planned, nodes = rec.Waves[next].PlannedCount, rec.Waves[next].PlannedNodes
	}
	nextPlanned.WithLabelValues("groups").Set(float64(planned))
	nextPlanned.WithLabelValues("nodes").Set(float64(nodes))
	groups.WithLabelValues("done").Set(float64(rec.GroupsDone))
	groups.WithLabelValues("failed").Set(float64(rec.GroupsFailed))
	groups.WithLabelValues("waiting").Set(float64(rec.GroupsWaiting))
	tenantGroups.WithLabelValues("early").Set(float64(len(rec.Early)))
	tenantGroups.WithLabelValues("late").Set(float64(len(rec.Late)))
	tenantGroups.WithLabelValues("deferred").Set(float64(len(rec.Deferred)))
	tenantGroups.WithLabelValues("failed").Set(float64(len(failedAlone(rec))))
	if rec.Halt != nil && rec.Phase != record.PhaseProgressing && rec.Phase != record.PhaseComplete {
		failedPods.Set(float64(rec.Halt.PodsCount))
	} else {
		failedPods.Set(0)
	}
	for _, n := range notes {
		if n.Reason == ReasonHalted && rec.Halt != nil {
			halts.WithLabelValues(rec.Halt.Criterion).Inc()
		}
	}
}

// Package slots caps how many InstanceGroups rotate nodes at once: the
// upgrade slots, a cluster-wide cap (--max-concurrent-upgrades or the
// boundary ConfigMap's rollout.maxConcurrentUpgrades) with a per-namespace
// share (the namespace quota's maxConcurrentUpgrades), judged by Full.
// Leases keeps them as coordination.k8s.io/v1 Leases, so a restart or a
// new leader sees the slots held, and tracks each holder's progress for
// the stall timeout. It imports nothing of the reconciler: the
// InstanceGroup reconciler takes and gives back slots, the strategies in
// reconciler/upgrade never see them.
package slots

// Package rollout runs instance-manager end to end (harness.Suite: the
// local control plane with controller manager, scheduler and kwok kubelets,
// moto as AWS, the instance-to-node bridge, the manager in process) while a
// fleet-wide change rolls out in waves: boundary ConfigMap revisions,
// published AMIs and control-plane upgrades (image pins), canary and soak,
// halt and rollback, maintenance windows and freezes, manual and tenant
// approval, workload health, and deletion during a halted rollout. Its
// siblings test/e2e/rotation (one group's nodes replaced) and
// test/e2e/lifecycle (the rest of a group's life) run beside it.
package rollout

// Package rotation runs instance-manager end to end (harness.Suite: the
// local control plane with controller manager, scheduler and kwok kubelets,
// moto as AWS, the instance-to-node bridge, the manager in process) while
// a group's nodes are replaced on purpose: rotations with drains and
// PodDisruptionBudgets, surge, weighted instances, upgrade slots, a
// boundary change fanned out at most N groups at a time, spot and
// interruption handling, capacity shortages, terminations started outside
// the controller. Its siblings test/e2e/rollout (fleet-wide changes in
// waves) and test/e2e/lifecycle (the rest of a group's life) run beside
// it.
package rotation

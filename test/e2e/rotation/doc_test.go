// Package rotation runs instance-manager end to end (harness.Suite: the
// local control plane with controller manager, scheduler and kwok kubelets,
// moto as AWS, the instance-to-node bridge, the manager in process) while
// nodes are replaced on purpose: rotations with drains and
// PodDisruptionBudgets, surge, upgrade slots, progressive rollouts of
// boundary changes (and deletion during them), spot and interruption
// handling, terminations started outside the controller. Its sibling
// test/e2e/lifecycle covers the rest of a group's life; the two run side
// by side.
package rotation

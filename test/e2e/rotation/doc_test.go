// Package rotation runs instance-manager end to end (harness.Suite: the
// local control plane with controller manager, scheduler and kwok kubelets,
// moto as AWS, the instance-to-node bridge, the manager in process) while
// nodes are replaced: rotations with drains and PodDisruptionBudgets,
// upgrade slots, progressive rollouts of boundary changes, node health,
// spot and interruption handling, and the AWS call budget. Its sibling
// test/e2e/lifecycle covers creation, ownership and deletion; the two run
// side by side.
package rotation

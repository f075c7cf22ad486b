// Package lifecycle runs instance-manager end to end (harness.Suite: the
// local control plane with controller manager, scheduler and kwok kubelets,
// moto as AWS, the instance-to-node bridge, the manager in process) through
// a group's life outside planned rotations: creation of each provisioner's
// resources (eks, eks-managed, eks-fargate, the crd strategy) and of the
// original project's shapes, node health (instances that never join or
// stop being Ready), the AWS call budget of idle and failing groups,
// ownership of AWS resources and the garbage collector, and deletion that
// drains and always ends, with AWS checked for leaks. Its siblings
// test/e2e/rotation (rotations) and test/e2e/rollout (fleet-wide changes
// in waves) run beside it.
package lifecycle

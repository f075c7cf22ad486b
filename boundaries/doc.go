// Package boundaries implements the policy layer of BOUNDARIES.md: it parses
// the admin's boundary ConfigMap, computes a tenant's effective InstanceGroup
// spec from the submitted one, hashes the boundary inputs for fan-out, and
// recovers the tenant's intent on updates.
//
// Admission has one entry point, Admit: canonical spellings (the table in
// api/v1alpha1/enums.go), keikoproj forms, the effective spec, the
// overrides a tenant makes now and the restricted behaviour annotations.
// Violations re-checks a stored spec for the validating webhook and the
// reconciler's admission gate; Recompute gives an existing group's
// effective spec under a new ConfigMap for its dry run. The crd strategy's
// template and its confinement are in boundaries/crdtemplate.
//
// Everything here is a pure function over JSON-shaped Go values
// (map[string]any, []any, string, bool, int64, float64, nil): no Kubernetes
// client, no AWS. The admission webhooks and the fan-out controller call it;
// they hold no merge logic of their own.
//
// Values handed in may use any numeric type or typed maps and slices; they
// are normalized to the canonical forms above (integers as int64, other
// numbers as float64, object entries whose value is JSON null dropped)
// before they are compared or merged, so the same document decoded by
// encoding/json, sigs.k8s.io/yaml or the unstructured converter behaves the
// same.
package boundaries

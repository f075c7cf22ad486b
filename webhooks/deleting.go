package webhooks

import admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

// notMetadataOnDeleting is the match condition of both InstanceGroup
// webhooks (admissionregistration.k8s.io/v1 matchConditions, CEL,
// evaluated by the API server before it calls a webhook): an UPDATE of a
// group already being deleted (oldObject carries metadata.deletionTimestamp)
// that changes neither its spec nor its annotations does not call them.
//
// That is every write the controller makes on a deleting group (the
// finalizer's release, a merge patch of metadata.finalizers; status goes
// through the status subresource, which the webhooks do not intercept),
// and every finalizer or label change of other owners. Neither webhook
// changes or refuses such a write (InstanceGroupMutator computes nothing
// for a deleting group, InstanceGroupValidator lets metadata through), so
// skipping them changes no answer; what it adds is that the deletion
// finishes when no webhook replica answers (an admission outage, with
// failurePolicy Fail). A spec or annotation change of a deleting group
// (a tenant's edit, the force-delete annotation) still goes to both
// webhooks: the first is refused, the second restricted as for any group.
//
// The expression never errors (an error would apply failurePolicy Fail):
// CREATE has no oldObject, and spec and annotations may be absent.
var notMetadataOnDeleting = admissionregistrationv1.MatchCondition{
	Name: "not-metadata-only-on-a-deleting-group",
	Expression: `request.operation != "UPDATE" || !has(oldObject.metadata.deletionTimestamp) || ` +
		`(has(object.spec) ? object.spec : {}) != (has(oldObject.spec) ? oldObject.spec : {}) || ` +
		`(has(object.metadata.annotations) ? object.metadata.annotations : {}) != (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})`,
}

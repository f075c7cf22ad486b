"""moto_server, with the fixes instance-manager's tests need where moto
differs from AWS. Started by test/env (moto.go) with the venv's python.

Fixes:
- CreateLaunchTemplateVersion: moto 5.2.5 stores the new version's UserData
  unparsed, and an Auto Scaling group launching from that version fails with
  an AssertionError (HTTP 500). AWS launches from any version. The data is
  parsed here as CreateLaunchTemplate already does.
- CreateAutoScalingGroup: moto 5.2.5 replaces a group of the same name (its
  instances keep running outside any group). AWS answers AlreadyExists
  (HTTP 400), which is what a caller meets when it retries a create whose
  answer it lost (test/faults resets connections after forwarding); the
  group is refused here as AWS refuses it.
- RemoveRoleFromInstanceProfile of a role the profile does not hold, and
  TerminateInstanceInAutoScalingGroup of an instance in no group: moto
  5.2.5 fails with HTTP 500 (an unhandled Python exception, which the SDK
  retries as a server error); AWS answers NoSuchEntity and ValidationError
  (HTTP 4xx). A retried call whose first answer was lost meets exactly
  these.
- EKS TagResource, UntagResource and ListTagsForResource: moto 5.2.5 finds
  clusters only and answers ResourceNotFoundException for a managed node
  group's or Fargate profile's ARN. AWS tags both (the eks-managed
  provisioner keeps node group tags in step in place); they are found here
  by ARN, and UntagResource removes every key of its query string (moto
  reads the first only).
- DescribeLaunchTemplates: moto 5.2.5 answers with the tags a launch
  template was created with, whatever CreateTags and DeleteTags did since.
  AWS answers with its tags as they are ("CreateTags: adds or overwrites
  only the specified tags", EC2 API Reference); a group created again under
  the same name retags the template it adopts. Its tags are read here from
  the tag store on each call.

Added behaviour (AWS does it, moto never does):
- CreateNodegroup: a node group whose tags carry
  "emulator.instancemgr/create-failures" = N ends in CREATE_FAILED, with
  an AsgInstanceLaunchFailures health issue, the first N times a node
  group of that cluster and name is created (as AWS leaves one whose
  instances cannot launch: "Managed node group errors", EKS User Guide,
  "Troubleshoot problems with Amazon EKS clusters and nodes"; EKS does not
  retry it). Tests make it happen to see the controller recover.

AWS's public EKS-optimized AMI parameters (`image: latest`) are
motossm.py's; clusters' authentication modes and EKS access entries
(bound to the IAM principal's id, as on AWS) are motoeksaccess.py's;
control-plane version updates (UpdateClusterVersion) motoeksversion.py's.

Auto Scaling's own behaviour (termination policy, lifecycle hooks,
rebalancing, scaling activities, warm pools) is motoautoscaling.py's,
installed here; IM_MOTO_AUTOSCALING chooses which behaviours are on.
"""
import sys

import motoautoscaling
import motoeksaccess
import motoeksversion
import motossm

from moto.autoscaling.exceptions import AutoscalingClientError
from moto.autoscaling.models import AutoScalingBackend
from moto.autoscaling.exceptions import ValidationError as AutoScalingValidationError
from moto.core.responses import EmptyResult
from moto.eks.models import EKSBackend
from moto.eks.responses import EKSResponse
from moto.core.types import Base64EncodedString
from moto.iam.exceptions import NotFoundException
from moto.iam.models import IAMBackend
from moto.ec2.models.launch_templates import LaunchTemplate
from moto.ec2.utils import parse_user_data
from moto.server import main

_create_version = LaunchTemplate.create_version


def _create_version_with_parsed_user_data(self, data, description):
    user_data = data.get("UserData")
    if user_data is not None and not isinstance(user_data, Base64EncodedString):
        data = dict(data, UserData=parse_user_data(user_data))
    return _create_version(self, data, description)


LaunchTemplate.create_version = _create_version_with_parsed_user_data


class AlreadyExistsFault(AutoscalingClientError):
    code = "AlreadyExists"


_create_group = AutoScalingBackend.create_auto_scaling_group


def _create_group_once(self, *args, **kwargs):
    name = kwargs["name"] if "name" in kwargs else args[0]
    if name in self.autoscaling_groups:
        raise AlreadyExistsFault(
            f"AutoScalingGroup by this name already exists - A group with the name {name} already exists"
        )
    return _create_group(self, *args, **kwargs)


AutoScalingBackend.create_auto_scaling_group = _create_group_once

# A launch template's tags as the tag store has them now (moto keeps the
# creation-time copy its constructor assigns; the setter drops it).
LaunchTemplate.tags = property(lambda self: self.get_tags(), lambda self, value: None)

_remove_role = IAMBackend.remove_role_from_instance_profile


def _remove_role_or_no_such_entity(self, profile_name, role_name):
    profile = self.get_instance_profile(profile_name)
    if not any(r.name == role_name for r in profile.roles):
        raise NotFoundException(
            f"Role {role_name} in instance profile {profile_name} cannot be found."
        )
    return _remove_role(self, profile_name, role_name)


IAMBackend.remove_role_from_instance_profile = _remove_role_or_no_such_entity

_terminate_instance = AutoScalingBackend.terminate_instance


def _terminate_instance_in_a_group(self, instance_id, should_decrement):
    if not any(
        state.instance.id == instance_id
        for group in self.autoscaling_groups.values()
        for state in group.instance_states
    ):
        raise AutoScalingValidationError(
            f"Instance Id not found - No managed instance found for instance ID: {instance_id}"
        )
    return _terminate_instance(self, instance_id, should_decrement)


AutoScalingBackend.terminate_instance = _terminate_instance_in_a_group



def _eks_tagged(backend, arn):
    """The node group or Fargate profile whose ARN is arn, or None."""
    for cluster in backend.clusters.values():
        for ng in cluster.nodegroups.values():
            if ng.arn == arn:
                return ng
        for fp in cluster.fargate_profiles.values():
            if fp.fargate_profile_arn == arn:
                return fp
    return None


_tag_resource = EKSBackend.tag_resource
_untag_resource = EKSBackend.untag_resource
_list_tags = EKSBackend.list_tags_for_resource


def _tag_resource_any(self, resource_arn, tags):
    res = _eks_tagged(self, resource_arn)
    if res is None:
        return _tag_resource(self, resource_arn, tags)
    res.tags.update(tags)


def _untag_resource_any(self, resource_arn, tag_keys):
    res = _eks_tagged(self, resource_arn)
    if res is None:
        return _untag_resource(self, resource_arn, tag_keys)
    if not isinstance(tag_keys, list):
        tag_keys = [tag_keys]
    for key in tag_keys:
        res.tags.pop(key, None)


def _list_tags_any(self, resource_arn):
    res = _eks_tagged(self, resource_arn)
    if res is None:
        return _list_tags(self, resource_arn)
    return res.tags


CREATE_FAILURES_TAG = "emulator.instancemgr/create-failures"
_create_nodegroup = EKSBackend.create_nodegroup
_create_failures = {}  # (cluster, node group) -> failed creations so far


def _create_nodegroup_failing(self, *args, **kwargs):
    ng = _create_nodegroup(self, *args, **kwargs)
    want = int((ng.tags or {}).get(CREATE_FAILURES_TAG, "0") or 0)
    key = (ng.cluster_name, ng.nodegroup_name)
    if _create_failures.get(key, 0) < want:
        _create_failures[key] = _create_failures.get(key, 0) + 1
        ng.status = "CREATE_FAILED"
        ng.health = {"issues": [{
            "code": "AsgInstanceLaunchFailures",
            "message": "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient m5.large capacity in the Availability Zone you requested. Launching EC2 instance failed.",
            "resourceIds": ["eks-" + ng.nodegroup_name],
        }]}
    return ng


EKSBackend.create_nodegroup = _create_nodegroup_failing

EKSBackend.tag_resource = _tag_resource_any
EKSBackend.untag_resource = _untag_resource_any
EKSBackend.list_tags_for_resource = _list_tags_any


def _untag_every_key(self):
    self.eks_backend.untag_resource(self._extract_arn_from_path(), self.querystring.get("tagKeys", []))
    return EmptyResult()


EKSResponse.untag_resource = _untag_every_key

# After the fixes above: its terminate replaces the one defined here.
motoautoscaling.install()
motossm.install()
motoeksaccess.install()
motoeksversion.install()

if __name__ == "__main__":
    sys.argv[0] = "moto_server"
    sys.exit(main())

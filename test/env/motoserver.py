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
"""
import sys

from moto.autoscaling.exceptions import AutoscalingClientError
from moto.autoscaling.models import AutoScalingBackend
from moto.autoscaling.exceptions import ValidationError as AutoScalingValidationError
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

if __name__ == "__main__":
    sys.argv[0] = "moto_server"
    sys.exit(main())

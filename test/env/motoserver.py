"""moto_server, with the fixes instance-manager's tests need where moto
differs from AWS. Started by test/env (moto.go) with the venv's python.

Fixes:
- CreateLaunchTemplateVersion: moto 5.2.5 stores the new version's UserData
  unparsed, and an Auto Scaling group launching from that version fails with
  an AssertionError (HTTP 500). AWS launches from any version. The data is
  parsed here as CreateLaunchTemplate already does.
"""
import sys

from moto.core.types import Base64EncodedString
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

if __name__ == "__main__":
    sys.argv[0] = "moto_server"
    sys.exit(main())

"""AWS's public EKS-optimized AMI parameters, which moto 5.2.5 does not
serve.

AWS publishes, in every region's SSM Parameter Store, the recommended AMI
id of each EKS-optimized image for each Kubernetes version (Amazon EKS User
Guide, "Retrieve recommended Amazon Linux AMI IDs",
https://docs.aws.amazon.com/eks/latest/userguide/retrieve-ami-id.html):

  /aws/service/eks/optimized-ami/<version>/amazon-linux-2/recommended/image_id
  /aws/service/eks/optimized-ami/<version>/amazon-linux-2-arm64/recommended/image_id
  /aws/service/eks/optimized-ami/<version>/amazon-linux-2023/<arch>/standard/recommended/image_id

moto answers ParameterNotFound for each, so `image: latest` could not be
tested. Here a name of that form, for a version 1.<minor> (any minor), is
answered with one of moto's own images of the architecture: the images
sorted by id, counted from the last, the minor version modulo 3 choosing
which, so that a control-plane upgrade changes the recommended AMI as it
does on AWS. Like AWS's, the names are reserved: PutParameter refuses them.
"""
import re

from moto.ec2.models import ec2_backends
from moto.ssm.models import Parameter, ParameterDict
from moto.core.utils import utcnow

_NAME = re.compile(
    r"^/aws/service/eks/optimized-ami/1\.(\d+)/"
    r"(amazon-linux-2|amazon-linux-2-arm64|amazon-linux-2023/(x86_64|arm64)/standard)"
    r"/recommended/image_id$"
)


def recommended_image(account_id, region, minor, arch):
    """The image id published for version 1.<minor> and arch, or None."""
    backend = ec2_backends[account_id][region]
    ids = sorted(
        i.id for i in backend.describe_images(filters={"architecture": [arch]})
    )
    if not ids:
        return None
    return ids[len(ids) - 1 - minor % min(3, len(ids))]


_check = ParameterDict._check_loading_status


def _check_with_eks_amis(self, key):
    _check(self, key)
    m = _NAME.match(str(key or ""))
    if m is None or dict.__contains__(self, key):
        return
    family, arch = m.group(2), m.group(3)
    if arch is None:
        arch = "arm64" if family.endswith("arm64") else "x86_64"
    image = recommended_image(self.account_id, self.region_name, int(m.group(1)), arch)
    if image is None:
        return
    self.setdefault(key, []).append(
        Parameter(
            account_id=self.account_id,
            name=key,
            value=image,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=utcnow(),
            version=1,
            data_type="aws:ec2:image",
        )
    )


def install():
    ParameterDict._check_loading_status = _check_with_eks_amis

"""EKS control-plane version updates for moto 5.2.5, which answers
UpdateClusterVersion with 404. Installed by motoserver.py. Each behaviour
follows the AWS document named:

- UpdateClusterVersion (EKS API Reference; POST
  /clusters/{name}/updates with {"version": ...}) answers an Update of
  type VersionUpdate with status InProgress and the params Version and
  PlatformVersion. A missing cluster is ResourceNotFoundException (404).
- "You can update only to the next Kubernetes minor version" and never
  down (EKS User Guide, "Update existing cluster to new Kubernetes
  version"): any other version is InvalidParameterException (400), as is
  the version the cluster runs.
- AWS takes minutes to update the control plane; DescribeCluster shows
  status UPDATING and the old version meanwhile. The emulator applies the
  version at once (a test would only wait); DescribeCluster then answers
  it, and the public EKS-optimized AMI parameters (motossm.py) for it.
"""
import datetime
import re
import uuid

from moto.core.responses import ActionResult
from moto.eks.exceptions import InvalidParameterException, ResourceNotFoundException
from moto.eks.responses import EKSResponse

_MINOR = re.compile(r"^1\.(\d+)$")


def _update_cluster_version(self):
    name = self._get_param("name")
    version = self._get_param("version") or ""
    cluster = self.eks_backend.clusters.get(name)
    if cluster is None:
        raise ResourceNotFoundException(
            clusterName=name, nodegroupName=None, fargateProfileName=None, addonName=None,
            message=f"No cluster found for name: {name}.",
        )
    have, want = _MINOR.match(str(cluster.version)), _MINOR.match(version)
    if have is None or want is None or int(want.group(1)) != int(have.group(1)) + 1:
        raise InvalidParameterException(
            message=f"Unsupported Kubernetes minor version update from {cluster.version} to {version}",
        )
    cluster.version = version
    update = {
        "id": str(uuid.uuid4()),
        "status": "InProgress",
        "type": "VersionUpdate",
        "params": [
            {"type": "Version", "value": version},
            {"type": "PlatformVersion", "value": getattr(cluster, "platformVersion", "eks.1")},
        ],
        "createdAt": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "errors": [],
    }
    return ActionResult({"update": update})


def install():
    """Patch moto."""
    from moto.eks import urls as eks_urls

    eks_urls.url_paths["{0}/clusters/(?P<name>[^/]+)/updates$"] = eks_urls.response.dispatch
    EKSResponse.update_cluster_version = _update_cluster_version

"""EKS access entries and cluster authentication modes for moto 5.2.5,
which has neither: DescribeCluster answers no accessConfig (the controller
then always takes the aws-auth ConfigMap path) and the access entry
operations answer 404. Installed by motoserver.py. Each behaviour follows
the AWS document named:

- CreateCluster's accessConfig.authenticationMode is kept and answered by
  DescribeCluster; without one it is CONFIG_MAP ("If you create a cluster
  by using the EKS API, AWS SDKs, or AWS CloudFormation, the default is
  CONFIG_MAP", EKS API Reference, CreateAccessConfigRequest).
- CreateAccessEntry, DescribeAccessEntry, ListAccessEntries,
  DeleteAccessEntry (EKS API Reference): a missing cluster or entry is
  ResourceNotFoundException (404); an entry for a principal that has one
  is ResourceInUseException (409); a principal that does not exist is
  InvalidParameterException (400). EC2_LINUX and EC2_WINDOWS entries get
  the username system:node:{{EC2PrivateDNSName}} and no Kubernetes groups
  (EKS User Guide, "Create access entries").
- An entry is bound to the unique id of the IAM principal it was created
  for: "If you delete and recreate the IAM principal, even if it has the
  same ARN, the access entry won't work" (EKS User Guide, "Create access
  entries"; EKS stores the roleID). AWS shows the id nowhere, so the
  emulator answers GET /im-emulator/eks/access-entry?cluster=C&principalArn=P
  with {"principalId": the id it was bound to, "authenticates": whether
  the principal of that ARN now has that id}; test/env's
  Env.AccessEntryAuthenticates reads it.
"""
import datetime
import json
import urllib.parse
import uuid

from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.responses import ActionResult, EmptyResult
from moto.eks import urls as eks_urls
from moto.eks.exceptions import (
    InvalidParameterException,
    ResourceInUseException,
    ResourceNotFoundException,
)
from moto.eks.models import EKSBackend, eks_backends
from moto.eks.responses import EKSResponse
from moto.iam.models import iam_backends
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

EC2_TYPES = ("EC2_LINUX", "EC2_WINDOWS")


def _entries(backend, cluster):
    """The cluster's entries by principal ARN (ResourceNotFound when the
    cluster does not exist)."""
    if cluster not in backend.clusters:
        raise ResourceNotFoundException(
            clusterName=cluster, nodegroupName=None, fargateProfileName=None, addonName=None,
            message=f"No cluster found for name: {cluster}.",
        )
    store = backend.__dict__.setdefault("_im_access_entries", {})
    return store.setdefault(cluster, {})


def _principal_id(backend, arn):
    """The unique id of the IAM role arn names, or None when it does not
    exist."""
    iam = iam_backends[backend.account_id][backend.partition]
    for role in iam.get_roles():
        if role.arn == arn:
            return role.id
    return None


def _not_found(cluster, arn):
    return ResourceNotFoundException(
        clusterName=cluster, nodegroupName=None, fargateProfileName=None, addonName=None,
        message=f"The specified access entry resource {arn} could not be found on cluster {cluster}.",
    )


def _public(entry):
    return {k: v for k, v in entry.items() if not k.startswith("_")}


def _create_access_entry(self):
    cluster, arn = self._get_param("name"), self._get_param("principalArn")
    typ = self._get_param("type") or "STANDARD"
    entries = _entries(self.eks_backend, cluster)
    if arn in entries:
        raise ResourceInUseException(
            clusterName=cluster, nodegroupName=None, addonName=None,
            message="The specified access entry resource is already in use on this cluster.",
        )
    principal_id = _principal_id(self.eks_backend, arn)
    if principal_id is None:
        raise InvalidParameterException(message=f"The specified principalArn is invalid: {arn} does not exist.")
    groups = self._get_param("kubernetesGroups") or []
    if typ in EC2_TYPES and groups:
        raise InvalidParameterException(message=f"kubernetesGroups cannot be specified for an access entry of type {typ}.")
    now = datetime.datetime.now(datetime.timezone.utc)
    name = arn.split("/")[-1]
    b = self.eks_backend
    entries[arn] = {
        "clusterName": cluster, "principalArn": arn, "type": typ, "kubernetesGroups": groups,
        "username": "system:node:{{EC2PrivateDNSName}}" if typ in EC2_TYPES else (self._get_param("username") or arn),
        "accessEntryArn": f"arn:{b.partition}:eks:{b.region_name}:{b.account_id}:access-entry/{cluster}/role/{b.account_id}/{name}/{uuid.uuid4()}",
        "createdAt": now, "modifiedAt": now, "tags": self._get_param("tags") or {},
        "_principalId": principal_id,
    }
    return ActionResult({"accessEntry": _public(entries[arn])})


def _describe_access_entry(self):
    cluster, arn = self._get_param("name"), self._get_param("principalArn")
    entry = _entries(self.eks_backend, cluster).get(arn)
    if entry is None:
        raise _not_found(cluster, arn)
    return ActionResult({"accessEntry": _public(entry)})


def _list_access_entries(self):
    entries = _entries(self.eks_backend, self._get_param("name"))
    return ActionResult({"accessEntries": sorted(entries)})


def _delete_access_entry(self):
    cluster, arn = self._get_param("name"), self._get_param("principalArn")
    entries = _entries(self.eks_backend, cluster)
    if entries.pop(arn, None) is None:
        raise _not_found(cluster, arn)
    return EmptyResult()


_moto_create_cluster = EKSBackend.create_cluster
_moto_response_create_cluster = EKSResponse.create_cluster


def _create_cluster_with_mode(self):
    result = _moto_response_create_cluster(self)
    access = self._get_param("accessConfig") or {}
    cluster = self.eks_backend.clusters[self._get_param("name")]
    cluster.access_config = {
        "authenticationMode": access.get("authenticationMode") or "CONFIG_MAP",
        "bootstrapClusterCreatorAdminPermissions": access.get("bootstrapClusterCreatorAdminPermissions", True),
    }
    return result


_moto_delete_cluster = EKSBackend.delete_cluster


def _delete_cluster_and_entries(self, name):
    out = _moto_delete_cluster(self, name)
    self.__dict__.get("_im_access_entries", {}).pop(name, None)  # EKS deletes a cluster's entries with it
    return out


def _respond(start_response, status, body):
    raw = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(raw)))])
    return [raw]


def _control(environ, start_response):
    q = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    cluster, arn = (q.get("cluster") or [""])[0], (q.get("principalArn") or [""])[0]
    region = (q.get("region") or ["us-east-1"])[0]
    backend = eks_backends[DEFAULT_ACCOUNT_ID][region]
    entry = backend.__dict__.get("_im_access_entries", {}).get(cluster, {}).get(arn)
    if entry is None:
        return _respond(start_response, "404 Not Found", {"error": f"no access entry for {arn} on cluster {cluster} in {region}"})
    current = _principal_id(backend, arn)
    return _respond(start_response, "200 OK", {"principalId": entry["_principalId"], "currentPrincipalId": current,
                                                "authenticates": current == entry["_principalId"]})


def install():
    """Patch moto (after motoautoscaling.install: the dispatcher installed
    there, if any, is wrapped)."""
    base = "{0}/clusters/(?P<name>[^/]+)/access-entries"
    eks_urls.url_paths[base + "$"] = eks_urls.response.dispatch
    eks_urls.url_paths[base + "/(?P<principalArn>.+)$"] = eks_urls.response.dispatch
    EKSResponse.create_access_entry = _create_access_entry
    EKSResponse.describe_access_entry = _describe_access_entry
    EKSResponse.list_access_entries = _list_access_entries
    EKSResponse.delete_access_entry = _delete_access_entry
    EKSResponse.create_cluster = _create_cluster_with_mode
    EKSBackend.delete_cluster = _delete_cluster_and_entries

    dispatch = DomainDispatcherApplication.__call__

    def _call(self, environ, start_response):
        if environ.get("PATH_INFO") == "/im-emulator/eks/access-entry" and environ.get("REQUEST_METHOD") == "GET":
            return _control(environ, start_response)
        return dispatch(self, environ, start_response)

    DomainDispatcherApplication.__call__ = _call

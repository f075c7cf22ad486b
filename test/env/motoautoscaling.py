"""Auto Scaling as AWS runs it, on top of moto 5.2.5 (loaded by motoserver.py).

moto launches and terminates synchronously and stores lifecycle hooks, warm
pools and suspended processes without acting on them. This module makes
its Auto Scaling groups behave as the Amazon EC2 Auto Scaling User Guide
describes; providers/aws/moto_autoscaling_contract_test.go checks each
behaviour against the document it names.

Behaviours (IM_MOTO_AUTOSCALING: "all" (the default here; test/env passes
its own, env.DefaultMotoAutoScaling), "none" (plain moto), or a comma list
of names, "-name" removing one from "all", e.g. "all,-rebalance"):
- termination: launches spread over the group's Availability Zones (the zone
  with the fewest instances first); scale in (desired capacity lowered)
  terminates by the default termination policy: the zone with the most
  instances that has an unprotected one; in it, instances of another launch
  template, then of the oldest template version; then the instance closest
  to its next billing hour (largest uptime modulo one hour); remaining ties:
  the earliest launched. Zone ties: the first zone in alphabetical order.
- hooks: every termination Auto Scaling starts (scale in,
  TerminateInstanceInAutoScalingGroup, rebalancing, health replacement)
  passes the group's autoscaling:EC2_INSTANCE_TERMINATING hooks
  (Terminating:Wait, the EC2 instance running) until CompleteLifecycleAction
  or the heartbeat timeout (then the hook's DefaultResult), then
  Terminating:Proceed, then terminated. RecordLifecycleActionHeartbeat
  restarts the timeout. Launch hooks hold new instances in Pending:Wait
  likewise (ABANDON terminates the instance). DeleteAutoScalingGroup
  terminates everything at once, as ForceDelete does.
  Each termination hook's wait sends an "EC2 Instance-terminate Lifecycle
  Action" event (source aws.autoscaling) to the account's default
  EventBridge bus, which moto delivers to the targets of matching rules
  (an SQS queue: the interruption queue).
  CreateAutoScalingGroup's LifecycleHookSpecificationList creates its hooks
  (moto ignores it), once the group and its first instances exist: they
  hold terminations, not the first launches.
  Health replacement: an instance marked Unhealthy (SetInstanceHealth) or
  whose EC2 instance is no longer running is terminated and replaced unless
  ReplaceUnhealthy is suspended.
- rebalance: while AZRebalance, Launch and Terminate are not suspended and
  no instance is pending, a group whose InService instances are unbalanced
  (zones differing by more than one, or instances in a zone the group no
  longer uses) launches one instance in the shortest zone, then terminates
  one in a zone it left or the longest zone (through the hooks), one pair
  per pass. It may exceed MaxSize by max(1, 10%) meanwhile.
- activities: DescribeScalingActivities lists launches and terminations
  (newest first) with StatusCode and Cause. Launches of an instance type the
  test marked short of capacity (POST /im-emulator/insufficient-capacity)
  fail with a Failed activity naming InsufficientInstanceCapacity; the group
  stays below its desired capacity and retries every RETRY_SECONDS.
- warmpool: PutWarmPool keeps max(MinSize, MaxGroupPreparedCapacity (default
  MaxSize) - desired capacity) instances in Warmed:Stopped (EC2 stopped),
  listed by DescribeWarmPool and not by DescribeAutoScalingGroups; scale
  out takes them first (started, InService), and the pool is refilled.

Time passes in passes: every Auto Scaling and EC2 request first runs one
pass over all groups (timeouts, rebalancing, health, retries, warm pool), so
a test sees a behaviour at its next call, never in the middle of one. The
requests and the passes hold one lock.

Test control (HTTP, on moto's port):
- POST /im-emulator/insufficient-capacity with a JSON body
  {"instanceTypes": ["m5.large", "c5.large/us-west-2a"]}: launches of those
  types (in every zone, or only the named one) fail as AWS fails them for
  InsufficientInstanceCapacity; an empty list ends it. moto's reset ends it.
- GET /im-emulator/behaviours: the behaviours on, as JSON.
"""
import json
import math
import os
import sys
import threading
import time
import traceback
import uuid

from moto.autoscaling.exceptions import ValidationError
from moto.autoscaling.models import (
    Activity,
    AutoScalingBackend,
    FakeAutoScalingGroup,
    InstanceState,
    autoscaling_backends,
)
from moto.autoscaling.responses import AutoScalingResponse
from moto.core.responses import ActionResult, EmptyResult
from moto.core.utils import utcnow
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

BEHAVIOURS = ("termination", "hooks", "rebalance", "activities", "warmpool")
RETRY_SECONDS = 10.0

TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"
LAUNCHING = "autoscaling:EC2_INSTANCE_LAUNCHING"
# States that count toward the desired capacity.
COUNTED = ("InService", "Pending", "Pending:Wait", "Pending:Proceed")


def parse_behaviours(spec):
    on = set()
    for word in (w.strip() for w in spec.split(",")):
        if word == "all":
            on |= set(BEHAVIOURS)
        elif word in ("", "none"):
            continue
        elif word.startswith("-") and word[1:] in BEHAVIOURS:
            on.discard(word[1:])
        elif word in BEHAVIOURS:
            on.add(word)
        else:
            raise SystemExit(f"IM_MOTO_AUTOSCALING: unknown behaviour {word!r} (known: all, none, {', '.join(BEHAVIOURS)})")
    return on


ENABLED = parse_behaviours(os.environ.get("IM_MOTO_AUTOSCALING", "all") or "all")


def on(name):
    return name in ENABLED


# --- activities -------------------------------------------------------------


class ScalingActivity(Activity):
    def __init__(self, group, description, cause, status_code="Successful", status_message=None):
        super().__init__(description, cause, group, status_code=status_code)
        self.status_message = status_message
        self.progress = 100 if status_code in ("Successful", "Failed") else 50
        if self.progress != 100:
            self.end_time = None
        self.auto_scaling_group_arn = group.arn

    def finish(self, status_code="Successful", status_message=None):
        self.status_code = status_code
        self.status_message = status_message
        self.progress = 100
        self.end_time = utcnow()


def _stamp():
    return utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")


def record(group, description, cause, **kwargs):
    act = ScalingActivity(group, description, cause, **kwargs)
    _seq[0] += 1
    act._im_seq = _seq[0]  # newest first, within one second too
    if on("activities"):
        if not hasattr(group, "_im_activities"):
            group._im_activities = []
        group._im_activities.append(act)
    return act


# --- helpers ----------------------------------------------------------------

_seq = [0]  # orders launches and activities


def counted(group):
    return [s for s in group.instance_states if s.lifecycle_state in COUNTED]


def group_zones(group):
    """The group's zones, each with the subnet launches use there (None
    without VPCZoneIdentifier), in alphabetical order of zone."""
    key = (group.vpc_zone_identifier, tuple(group.availability_zones))
    cached = getattr(group, "_im_zones", None)
    if cached and cached[0] == key:
        return cached[1]  # every pass asks; subnets do not move between zones
    zones = {}
    if group.vpc_zone_identifier:
        for subnet_id in group.vpc_zone_identifier.split(","):
            subnet = group.ec2_backend.get_subnet(subnet_id.strip())
            zones.setdefault(subnet.availability_zone, subnet.id)
    else:
        for az in group.availability_zones:
            zones.setdefault(az, None)
    group._im_zones = (key, dict(sorted(zones.items())))
    return group._im_zones[1]


def hooks(group, transition):
    if not on("hooks"):
        return []
    backend = group.autoscaling_backend
    return [h for h in backend.lifecycle_hooks.values()
            if h.auto_scaling_group_name == group.name and h.lifecycle_transition == transition]


def suspended(group, process):
    return process in group._suspended_processes


def target_instances(group):
    """Instances the desired capacity asks for. Weighted groups count the
    first override's WeightedCapacity per instance, as moto does."""
    desired = group.desired_capacity or 0
    policy = group.mixed_instances_policy or {}
    overrides = (policy.get("LaunchTemplate") or {}).get("Overrides") or []
    if not overrides:
        return desired
    w = str(overrides[0].get("WeightedCapacity", "1"))
    weight = int(w) if w.isdigit() and int(w) > 0 else 1
    dist = policy.get("InstancesDistribution") or {}
    base = int(dist.get("OnDemandBaseCapacity", 0))
    pct = int(dist.get("OnDemandPercentageAboveBaseCapacity", 100))
    if base >= desired:
        on_demand, spot = desired, 0
    else:
        above = (desired - base) * pct / 100.0
        on_demand = int(base + above)
        spot = int(desired - base - above)
    return math.ceil(on_demand / weight) + math.ceil(spot / weight)


def _capacity_cause(group, before, after, why):
    return f"At {_stamp()} {why}, {'increasing' if after > before else 'shrinking'} the capacity from {before} to {after}."


# --- short capacity ---------------------------------------------------------


def short_zones(group, instance_type):
    """Zones where launches of instance_type fail (None: every zone)."""
    short = getattr(group.autoscaling_backend, "_im_short", set())
    if instance_type in short:
        return None
    return {entry.split("/", 1)[1] for entry in short if entry.startswith(instance_type + "/")}


# --- launching --------------------------------------------------------------


def _pick_zone(group, zones, avoid, members=None):
    """The zone with the fewest of members (default: the counted instances)
    (termination behaviour), else moto's first subnet."""
    usable = [az for az in zones if az not in avoid]
    if not usable:
        return None
    if not on("termination"):
        first = next(iter(zones))
        if group.vpc_zone_identifier:  # moto's choice: the first subnet listed
            first = group.ec2_backend.get_subnet(group.vpc_zone_identifier.split(",")[0].strip()).availability_zone
        return first if first in usable else None
    load = {az: 0 for az in zones}
    for az in (s.availability_zone for s in counted(group)) if members is None else members:
        if az in load:
            load[az] += 1
    return min(usable, key=lambda az: (load[az], az))


def run_one(group, az, subnet_id, propagated_tags):
    tags = dict(propagated_tags)
    tags["aws:autoscaling:groupName"] = group.name
    tags.update(group.instance_tags)
    launch_template = None
    if group.ec2_launch_template:
        launch_template = {"LaunchTemplateId": group.ec2_launch_template.id}
    reservation = group.ec2_backend.run_instances(
        group.image_id, 1, group.user_data, group.security_groups,
        instance_type=group.instance_type, tags={"instance": tags},
        placement=az, launch_config=group.launch_config, launch_template=launch_template,
        is_instance_type_default=False,
        associate_public_ip=group.launch_config.associate_public_ip_address if group.launch_config else None,
        subnet_id=subnet_id)
    instance = reservation.instances[0]
    instance.autoscaling_group = group
    _seq[0] += 1
    instance._im_seq = _seq[0]
    if group.ec2_launch_template:
        version = group.ec2_launch_template.get_version(group.launch_template_version)
        instance._im_template = (group.ec2_launch_template.id, int(version.number))
    else:
        instance._im_template = (group.launch_configuration_name, 0)
    return instance


def launch(group, count, cause_why, in_pass=False):
    """Launch count instances into the group (warm pool first), one zone at
    a time; a launch short of capacity records a Failed activity and stops.
    Passes retry a failed launch after RETRY_SECONDS."""
    if count <= 0 or in_pass and time.monotonic() < getattr(group, "_im_retry_at", 0.0):
        return
    zones = group_zones(group)
    tags = group.get_propagated_tags()
    for _ in range(count):
        before = len(counted(group))
        warm = take_warm(group)
        if warm is not None:
            warm.start()
            st = InstanceState(warm, protected_from_scale_in=group.new_instances_protected_from_scale_in)
            group.instance_states.append(st)
            act = record(group, f"Launching a new EC2 instance from warm pool: {warm.id}",
                         _capacity_cause(group, before, before + 1, cause_why))
            wait_on(group, st, LAUNCHING, act)
            continue
        itype = group.instance_type
        short = short_zones(group, itype) if on("activities") else set()
        az = _pick_zone(group, zones, set(zones) if short is None else short)
        if az is None:
            where = next(iter(zones), group.autoscaling_backend.region_name + "a")
            others = ", ".join(z for z in zones if z != where)
            message = (f"Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have sufficient "
                       f"{itype} capacity in the Availability Zone you requested ({where}). Our system will be working on "
                       f"provisioning additional capacity. You can currently get {itype} capacity by not specifying an "
                       f"Availability Zone in your request or choosing {others or 'another Availability Zone'}. "
                       f"Launching EC2 instance failed.")
            record(group, f"Launching a new EC2 instance.  Status Reason: {message}",
                   _capacity_cause(group, before, before + 1, cause_why),
                   status_code="Failed", status_message=message)
            group._im_retry_at = time.monotonic() + RETRY_SECONDS
            return
        instance = run_one(group, az, zones[az], tags)
        st = InstanceState(instance, protected_from_scale_in=group.new_instances_protected_from_scale_in)
        group.instance_states.append(st)
        act = record(group, f"Launching a new EC2 instance: {instance.id}",
                     _capacity_cause(group, before, before + 1, cause_why))
        wait_on(group, st, LAUNCHING, act)


# --- lifecycle waits --------------------------------------------------------


class Wait:
    """The lifecycle actions an instance waits on: hook name -> deadline."""

    def __init__(self, transition, hook_list, activity):
        now = time.monotonic()
        self.transition = transition
        self.hooks = {h.name: h for h in hook_list}
        self.deadlines = {h.name: now + int(h.heartbeat_timeout) for h in hook_list}
        self.token = str(uuid.uuid4())
        self.activity = activity


def wait_on(group, st, transition, activity):
    """Put st in the wait state of transition when the group has such
    hooks; otherwise move it on at once."""
    found = hooks(group, transition)
    if not found:
        st._im_wait = None
        if transition == LAUNCHING:
            st.lifecycle_state = "InService"
        return False
    st._im_wait = Wait(transition, found, activity)
    st.lifecycle_state = "Pending:Wait" if transition == LAUNCHING else "Terminating:Wait"
    activity.status_code = "MidLifecycleAction"
    activity.progress = 50
    activity.end_time = None
    if transition == TERMINATING:
        for h in found:
            emit_terminate_action(group, st, h, st._im_wait.token)
    return True


def emit_terminate_action(group, st, hook, token):
    """Send the "EC2 Instance-terminate Lifecycle Action" event of one
    termination hook's wait to the default EventBridge bus, with the
    fields the Amazon EC2 Auto Scaling User Guide lists ("Amazon
    EventBridge events for Amazon EC2 Auto Scaling"): source
    aws.autoscaling, resources [the group's ARN], detail
    LifecycleActionToken, AutoScalingGroupName, LifecycleHookName,
    EC2InstanceId, LifecycleTransition, NotificationMetadata, Origin
    (AutoScalingGroup), Destination (EC2). A bus without rules drops it,
    as EventBridge does."""
    from moto.events.models import events_backends
    detail = {
        "LifecycleActionToken": token,
        "AutoScalingGroupName": group.name,
        "LifecycleHookName": hook.name,
        "EC2InstanceId": st.instance.id,
        "LifecycleTransition": TERMINATING,
        "NotificationMetadata": getattr(hook, "notification_metadata", None) or "",
        "Origin": "AutoScalingGroup",
        "Destination": "EC2",
    }
    try:
        events_backends[group.account_id][group.region].put_events([{
            "Source": "aws.autoscaling", "DetailType": "EC2 Instance-terminate Lifecycle Action",
            "Detail": json.dumps(detail), "Resources": [group.arn]}])
    except Exception:  # an event lost must not stop the termination
        traceback.print_exc(file=sys.stderr)


def begin_termination(group, st, cause, force=False):
    act = record(group, f"Terminating EC2 instance: {st.instance.id}", cause, status_code="InProgress")
    if force or not wait_on(group, st, TERMINATING, act):
        finish_termination(group, st, act)
    return act


def finish_termination(group, st, act=None):
    st.lifecycle_state = "Terminating:Proceed"
    if st.instance.state != "terminated":
        group.ec2_backend.terminate_instances([st.instance.id])
    if st in group.instance_states:
        group.instance_states.remove(st)
    if act is None and getattr(st, "_im_wait", None) is not None:
        act = st._im_wait.activity
    if act is not None:
        act.finish()
    st._im_wait = None


def complete(group, st, hook_name, result):
    """One hook of st's wait is done with result (CONTINUE/ABANDON)."""
    wait = st._im_wait
    wait.hooks.pop(hook_name, None)
    wait.deadlines.pop(hook_name, None)
    if result == "ABANDON":
        wait.hooks.clear()
        wait.deadlines.clear()
    if wait.hooks:
        return
    if wait.transition == TERMINATING:
        # Terminated at the next pass.
        st.lifecycle_state = "Terminating:Proceed"
    elif result == "ABANDON":
        wait.activity.finish("Failed", "Instance failed to complete user's Lifecycle Action: Lifecycle Action with token "
                             f"{wait.token} was abandoned: Lifecycle Action Completed with ABANDON Result")
        st._im_wait = None
        begin_termination(group, st, f"At {_stamp()} an instance was taken out of service in response to a launch lifecycle action abandoned.", force=True)
    else:
        st.lifecycle_state = "InService"
        wait.activity.finish()
        st._im_wait = None


def find_waiting(backend, group_name, instance_id, token):
    group = backend.autoscaling_groups.get(group_name)
    if group is not None:
        for st in group.instance_states:
            w = getattr(st, "_im_wait", None)
            if w is not None and (st.instance.id == instance_id or (token and w.token == token)):
                return group, st
    raise ValidationError(f"No active Lifecycle Action found with instance ID {instance_id or token}")


# --- scale in ---------------------------------------------------------------


def _billing(st, now):
    return (now - st.instance.launch_time).total_seconds() % 3600


def pick_for_scale_in(group, n):
    chosen = []
    for _ in range(n):
        pool = [s for s in counted(group) if s not in chosen and not s.protected_from_scale_in]
        if not pool:
            break
        if not on("termination"):
            chosen.append(pool[0])
            continue
        load = {}
        for s in counted(group):
            if s not in chosen:
                load[s.availability_zone] = load.get(s.availability_zone, 0) + 1
        zones = {s.availability_zone for s in pool}
        az = min(zones, key=lambda z: (-load[z], z))
        chosen.append(policy_victim(group, [s for s in pool if s.availability_zone == az]))
    return chosen


def policy_victim(group, candidates):
    """The default policy's choice within one zone: another launch template
    first, then the oldest version, then the closest to the next billing
    hour, then the earliest launched."""
    current = group.ec2_launch_template.id if group.ec2_launch_template else group.launch_configuration_name
    now = utcnow()

    def rank(s):
        template, version = getattr(s.instance, "_im_template", (current, 0))
        return (template == current, version, -_billing(s, now), getattr(s.instance, "_im_seq", 0))

    return min(candidates, key=rank, default=None)


# --- converging -------------------------------------------------------------


def converge(group, why="an instance was started in response to a difference between desired and actual capacity", in_pass=False):
    if getattr(group, "_im_deleting", False):
        for st in list(group.instance_states):
            begin_termination(group, st, f"At {_stamp()} an instance was taken out of service in response to a user request (group deleted).", force=True)
        for inst in list(getattr(group, "_im_warm", [])):
            group.ec2_backend.terminate_instances([inst.id])
        group._im_warm = []
        return
    target = target_instances(group)
    have = len(counted(group))
    if target > have:
        launch(group, target - have, why, in_pass)
    elif target < have:
        for st in pick_for_scale_in(group, have - target):
            begin_termination(group, st, f"At {_stamp()} an instance was taken out of service in response to a difference between desired "
                              f"and actual capacity, shrinking the capacity from {have} to {target}. At {_stamp()} instance "
                              f"{st.instance.id} was selected for termination.")
    refill_warm(group)


def _set_desired_capacity(self, new_capacity):
    self.desired_capacity = self.min_size if new_capacity is None else new_capacity
    converge(self)
    if self.name in self.autoscaling_backend.autoscaling_groups:
        self.autoscaling_backend.update_attached_elbs(self.name)
        self.autoscaling_backend.update_attached_target_groups(self.name)


def _terminate_instance(self, instance_id, should_decrement):
    for group in self.autoscaling_groups.values():
        for st in group.instance_states:
            if st.instance.id == instance_id:
                break
        else:
            continue
        break
    else:
        raise ValidationError(f"Instance Id not found - No managed instance found for instance ID: {instance_id}")
    if st.lifecycle_state.startswith("Terminating"):
        # Not verified against AWS: answered as a repeat of the first call.
        wait = getattr(st, "_im_wait", None)
        return wait.activity if wait else ScalingActivity(group, f"Terminating EC2 instance: {instance_id}", "", status_code="InProgress")
    before = group.desired_capacity
    if should_decrement:
        group.desired_capacity = before - 1
    cause = f"At {_stamp()} instance {instance_id} was taken out of service in response to a user request"
    cause += f", shrinking the capacity from {before} to {group.desired_capacity}." if should_decrement else "."
    act = begin_termination(group, st, cause)
    converge(group)
    return act


_delete_group = AutoScalingBackend.delete_auto_scaling_group


def _delete_group_force(self, group_name):
    group = self.autoscaling_groups.get(group_name)
    if group is not None:
        group._im_deleting = True
    return _delete_group(self, group_name)


# --- warm pool --------------------------------------------------------------


def take_warm(group):
    warm = getattr(group, "_im_warm", None)
    if not on("warmpool") or not warm:
        return None
    return warm.pop(0)


def warm_target(group):
    pool = getattr(group, "warm_pool", None)  # unset while the group is being created
    if pool is None or not on("warmpool"):
        return 0
    prepared = pool.max_group_prepared_capacity
    prepared = int(prepared) if prepared not in (None, -1, "-1") else (group.max_size or 0)
    return max(int(pool.min_size or 0), prepared - (group.desired_capacity or 0))


def refill_warm(group):
    if not on("warmpool") or getattr(group, "_im_deleting", False):
        return
    warm = getattr(group, "_im_warm", None)
    if warm is None:
        warm = group._im_warm = []
    want = warm_target(group)
    if want <= len(warm):
        while len(warm) > want:
            group.ec2_backend.terminate_instances([warm.pop().id])
        return
    zones = group_zones(group)
    short = short_zones(group, group.instance_type) if on("activities") else set()
    tags = group.get_propagated_tags()
    while len(warm) < want:
        az = _pick_zone(group, zones, set(zones) if short is None else short, [i.placement.zone for i in warm])
        if az is None:
            return  # short of capacity: the pool stays short, refilled at a later pass
        inst = run_one(group, az, zones[az], tags)
        inst.stop()
        warm.append(inst)


class WarmInstance:
    def __init__(self, inst, pool_state):
        self.instance_id = inst.id
        self.instance_type = inst.instance_type
        self.availability_zone = inst.placement.zone
        self.lifecycle_state = f"Warmed:{pool_state}"
        self.health_status = "Healthy"
        self.protected_from_scale_in = False
        self.launch_template = {"LaunchTemplateId": inst._im_template[0], "Version": str(inst._im_template[1])}


# --- passes -----------------------------------------------------------------


def rebalance(group):
    if not on("rebalance") or any(suspended(group, p) for p in ("AZRebalance", "Launch", "Terminate")):
        return
    if any(s.lifecycle_state.startswith("Pending") for s in group.instance_states):
        return
    zones = group_zones(group)
    insvc = [s for s in group.instance_states if s.lifecycle_state == "InService"]
    if not zones or not insvc:
        return
    load = {az: 0 for az in zones}
    outside = []
    for s in insvc:
        if s.availability_zone in load:
            load[s.availability_zone] += 1
        else:
            outside.append(s)
    if not outside and max(load.values()) - min(load.values()) <= 1:
        return
    short = short_zones(group, group.instance_type) if on("activities") else set()
    if short is None:
        return
    candidates = [az for az in zones if az not in short]
    if not candidates:
        return
    az = min(candidates, key=lambda z: (load[z], z))
    longest = max(load.values())
    if not outside and load[az] + 1 >= longest:
        return  # moving one would not make it better
    margin = max(1, math.ceil((group.max_size or 0) * 0.1))
    if len(counted(group)) + 1 > (group.max_size or 0) + margin:
        return
    why = "an instance was started in response to an imbalance of instances between Availability Zones"
    before = len(counted(group))
    instance = run_one(group, az, zones[az], group.get_propagated_tags())
    st = InstanceState(instance, protected_from_scale_in=group.new_instances_protected_from_scale_in)
    group.instance_states.append(st)
    act = record(group, f"Launching a new EC2 instance: {instance.id}", f"At {_stamp()} {why}.")
    if wait_on(group, st, LAUNCHING, act):
        return  # terminate once the new instance is in service
    if outside:
        victim = outside[0]
    else:
        victim_az = min(zones, key=lambda z: (-load[z], z))
        victim = policy_victim(group, [s for s in insvc if s.availability_zone == victim_az and not s.protected_from_scale_in])
    if victim is not None:
        begin_termination(group, victim, f"At {_stamp()} an instance was taken out of service in response to an Availability Zone rebalancing, "
                          f"shrinking the capacity from {before + 1} to {before}.")


def replace_unhealthy(group):
    if not (on("hooks") or on("termination")) or suspended(group, "ReplaceUnhealthy"):
        return
    for st in list(group.instance_states):
        if st.lifecycle_state != "InService":
            continue
        if st.health_status == "Unhealthy" or st.instance.state != "running":
            st.health_status = "Unhealthy"
            force = st.instance.state in ("terminated", "shutting-down")
            begin_termination(group, st, f"At {_stamp()} an instance was taken out of service in response to an EC2 health check "
                              f"indicating it has been terminated or stopped." if force else
                              f"At {_stamp()} an instance was taken out of service in response to a user health-check.", force=force)


def pass_group(group):
    now = time.monotonic()
    for st in list(group.instance_states):
        wait = getattr(st, "_im_wait", None)
        if st.lifecycle_state == "Terminating:Proceed":
            finish_termination(group, st)
            continue
        if wait is None:
            continue
        for name, deadline in list(wait.deadlines.items()):
            if now >= deadline and name in wait.hooks:
                complete(group, st, name, wait.hooks[name].default_result)
                if st._im_wait is None:
                    break
        if st.lifecycle_state == "Terminating:Proceed":
            finish_termination(group, st)
    replace_unhealthy(group)
    rebalance(group)
    converge(group, in_pass=True)


def run_pass():
    for account in list(autoscaling_backends.values()):
        for backend in list(account.values()):
            for group in list(backend.autoscaling_groups.values()):
                try:
                    pass_group(group)
                except Exception:
                    print(f"im-emulator: pass over group {group.name} failed:", file=sys.stderr)
                    traceback.print_exc()


# --- API --------------------------------------------------------------------


def _complete_lifecycle_action(self):
    group, st = find_waiting(self.autoscaling_backend, self._get_param("AutoScalingGroupName"),
                             self._get_param("InstanceId"), self._get_param("LifecycleActionToken"))
    name = self._get_param("LifecycleHookName")
    result = self._get_param("LifecycleActionResult")
    if result not in ("CONTINUE", "ABANDON"):
        raise ValidationError("LifecycleActionResult must be CONTINUE or ABANDON")
    if name not in st._im_wait.hooks:
        raise ValidationError(f"No active Lifecycle Action found with instance ID {st.instance.id}")
    complete(group, st, name, result)
    return EmptyResult()


def _record_heartbeat(self):
    group, st = find_waiting(self.autoscaling_backend, self._get_param("AutoScalingGroupName"),
                             self._get_param("InstanceId"), self._get_param("LifecycleActionToken"))
    name = self._get_param("LifecycleHookName")
    if name not in st._im_wait.hooks:
        raise ValidationError(f"No active Lifecycle Action found with instance ID {st.instance.id}")
    st._im_wait.deadlines[name] = time.monotonic() + int(st._im_wait.hooks[name].heartbeat_timeout)
    return EmptyResult()


def _describe_scaling_activities(self):
    name = self._get_param("AutoScalingGroupName")
    ids = self._get_param("ActivityIds", [])
    groups = self.autoscaling_backend.autoscaling_groups
    acts = []
    for group in ([groups[name]] if name in groups else [] if name else groups.values()):
        acts.extend(getattr(group, "_im_activities", []))
    if ids:
        acts = [a for a in acts if a.activity_id in ids]
    acts.sort(key=lambda a: a._im_seq, reverse=True)
    start = int(self._get_param("NextToken") or 0)
    size = int(self._get_param("MaxRecords") or 100)
    page = acts[start:start + size]
    token = str(start + size) if start + size < len(acts) else None
    return ActionResult({"Activities": page, "NextToken": token})


def _describe_warm_pool(self):
    group = self.autoscaling_backend.describe_auto_scaling_groups([self._get_param("AutoScalingGroupName")])[0]
    pool = group.get_warm_pool()
    state = pool.pool_state if pool else "Stopped"
    instances = [WarmInstance(i, state) for i in getattr(group, "_im_warm", [])] if pool else []
    return ActionResult({"WarmPoolConfiguration": pool, "Instances": instances})


_delete_warm_pool = AutoScalingBackend.delete_warm_pool


def _delete_warm_pool_and_instances(self, group_name):
    group = self.describe_auto_scaling_groups([group_name])[0]
    for inst in getattr(group, "_im_warm", []):
        group.ec2_backend.terminate_instances([inst.id])
    group._im_warm = []
    return _delete_warm_pool(self, group_name)


# --- server -----------------------------------------------------------------

LOCK = threading.RLock()
_dispatch = DomainDispatcherApplication.__call__


def _respond(start_response, status, body):
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def _control(environ, start_response):
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD")
    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    from moto.core import DEFAULT_ACCOUNT_ID

    if path == "/im-emulator/behaviours" and method == "GET":
        return _respond(start_response, "200 OK", {"behaviours": sorted(ENABLED)})
    if path == "/im-emulator/insufficient-capacity" and method == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            body = json.loads(environ["wsgi.input"].read(length) or b"{}")
            types = [str(t) for t in body.get("instanceTypes") or []]
        except (ValueError, AttributeError) as err:
            return _respond(start_response, "400 Bad Request", {"error": str(err)})
        autoscaling_backends[DEFAULT_ACCOUNT_ID][region]._im_short = set(types)
        return _respond(start_response, "200 OK", {"instanceTypes": sorted(types)})
    return _respond(start_response, "404 Not Found", {"error": f"no {method} {path}"})


def _dispatch_in_passes(self, environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path.startswith("/im-emulator/"):
        with LOCK:
            return _control(environ, start_response)
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if path.startswith("/moto-api/"):
        with LOCK:
            return _dispatch(self, environ, start_response)
    if "/autoscaling/aws4_request" in auth or "/ec2/aws4_request" in auth:
        with LOCK:
            run_pass()
            return _dispatch(self, environ, start_response)
    return _dispatch(self, environ, start_response)


_moto_create_group = AutoScalingResponse.create_auto_scaling_group


def _create_group_with_hooks(self):
    """CreateAutoScalingGroup, then the hooks of its
    LifecycleHookSpecificationList (PutLifecycleHook's defaults: ABANDON,
    3600 s)."""
    result = _moto_create_group(self)
    name = self._get_param("AutoScalingGroupName")
    for spec in self._get_params().get("LifecycleHookSpecificationList") or []:
        self.autoscaling_backend.create_lifecycle_hook(
            name=spec.get("LifecycleHookName"),
            as_name=name,
            transition=spec.get("LifecycleTransition"),
            timeout=int(spec.get("HeartbeatTimeout") or 3600),
            result=spec.get("DefaultResult") or "ABANDON",
        )
    return result


def install():
    """Patch moto; a no-op when every behaviour is off (plain moto)."""
    if not ENABLED:
        return
    FakeAutoScalingGroup.set_desired_capacity = _set_desired_capacity
    AutoScalingBackend.terminate_instance = _terminate_instance
    AutoScalingBackend.delete_auto_scaling_group = _delete_group_force
    AutoScalingBackend.delete_warm_pool = _delete_warm_pool_and_instances
    AutoScalingResponse.create_auto_scaling_group = _create_group_with_hooks
    AutoScalingResponse.complete_lifecycle_action = _complete_lifecycle_action
    AutoScalingResponse.record_lifecycle_action_heartbeat = _record_heartbeat
    AutoScalingResponse.describe_scaling_activities = _describe_scaling_activities
    AutoScalingResponse.describe_warm_pool = _describe_warm_pool
    DomainDispatcherApplication.__call__ = _dispatch_in_passes

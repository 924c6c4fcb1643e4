"""``POST /validate/pods`` over TLS: DRA-backed quantities on CREATE, the mapping on status writes."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from webhook.admission import AdmissionConfig
from webhook.core.api.constants import DEVICE_CLASS_PREFIX
from webhook.core.api.objects import Obj
from webhook.kube.cache import ClusterCache

from .builders import (
    GPU,
    GPU_CLASS,
    SCHEDULER,
    USER,
    WORKER,
    causes,
    container,
    gpu_cluster,
    gpu_pod,
    mapping,
    pod,
    review,
    special_claim,
    with_mapping,
)
from .conftest import Webhook

PATH = "/validate/pods"
NOT_INTEGER = "must be an integer"  # isNotIntegerErrorMsg
NEGATIVE = "must be greater than or equal to 0"  # IsNegativeErrorMsg
ERCS = "status.extendedResourceClaimStatus"


def _status_update(old: Obj, new: Obj, user: str = WORKER, sub_resource: str = "status") -> Obj:
    return review(new, operation="UPDATE", old=old, user=user, sub_resource=sub_resource)


# --- CREATE: quantities ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "body"),
    [
        ("0.5", f"Invalid value: 500m: {NOT_INTEGER}"),
        ("500m", f"Invalid value: 500m: {NOT_INTEGER}"),
        ("1.5", f"Invalid value: 1500m: {NOT_INTEGER}"),
        (0.5, f"Invalid value: 500m: {NOT_INTEGER}"),
        ("-1", f'Invalid value: "-1": {NEGATIVE}'),
        (-2, f'Invalid value: "-2": {NEGATIVE}'),
        (
            "1e400",
            f"Invalid value: 10e399: {NOT_INTEGER}: the largest device count is 9223372036854775807 (int64)",
        ),
        (
            "9223372036854775808",
            f"Invalid value: 9223372036854775808: {NOT_INTEGER}: "
            "the largest device count is 9223372036854775807 (int64)",
        ),
    ],
)
def test_dra_quantities_that_are_no_device_count_are_denied(webhook: Webhook, value: Any, body: str) -> None:
    # Upstream's ValidateResourceQuantityValue messages; AsInt64 decides what an integer is.
    webhook.install(gpu_cluster())
    response = webhook.respond(PATH, review(gpu_pod("p", value)))
    assert response["allowed"] is False
    field = f"spec.containers[0].resources.requests[{GPU}]"
    assert response["status"]["code"] == 422
    assert response["status"]["message"] == f'Pod "p" is invalid: {field}: {body}'
    assert causes(response) == [(field, "FieldValueInvalid", body)]


@pytest.mark.parametrize("value", ["1", 2, "0", "1k"])
def test_integer_dra_quantities_are_allowed(webhook: Webhook, value: Any) -> None:
    webhook.install(gpu_cluster())
    assert webhook.respond(PATH, review(gpu_pod("p", value)))["allowed"] is True


def test_implicit_names_limits_and_init_containers_are_checked(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    implicit = DEVICE_CLASS_PREFIX + GPU_CLASS
    c = container("c")
    c["resources"] = {"limits": {implicit: "0.5"}}
    init = container("init", {GPU: "250m"})
    response = webhook.respond(PATH, review(pod("p", [c], init=[init])))
    assert response["allowed"] is False
    assert [f for f, _, _ in causes(response)] == [
        f"spec.initContainers[0].resources.requests[{GPU}]",
        f"spec.containers[0].resources.limits[{implicit}]",
    ]


def test_names_no_class_backs_are_not_this_hooks_business(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    assert webhook.respond(PATH, review(gpu_pod("p", "0.5", resource="example.com/tpu")))["allowed"] is True


def test_a_generated_name_pod_is_denied_under_an_empty_name(webhook: Webhook) -> None:
    webhook.install(gpu_cluster())
    p = gpu_pod("x", "0.5")
    del p["metadata"]["name"]
    p["metadata"]["generateName"] = "train-"
    response = webhook.respond(PATH, review(p))
    assert response["status"]["message"].startswith('Pod "" is invalid: ')


# --- UPDATE: the mapping, upstream rules -------------------------------------------------------


def test_a_status_update_that_keeps_the_mapping_is_allowed_for_anyone(webhook: Webhook) -> None:
    # The kubelet updating the phase: nothing is looked up, even a broken mapping passes.
    old = with_mapping(gpu_pod(), {"resourceClaimName": "", "requestMappings": []})
    new = copy.deepcopy(old)
    new["status"]["phase"] = "Running"
    response = webhook.respond(PATH, _status_update(old, new, user="system:node:n1"))
    assert response["allowed"] is True


@pytest.mark.parametrize(
    ("ercs", "expected"),
    [
        (
            {"resourceClaimName": "c", "requestMappings": []},
            [
                (
                    f"{ERCS}.requestMappings",
                    "FieldValueRequired",
                    "Required value: at least one request mapping is required",
                )
            ],
        ),
        (
            {
                "resourceClaimName": "c",
                "requestMappings": [{"containerName": "nope", "resourceName": GPU, "requestName": "r"}],
            },
            [
                (
                    f"{ERCS}.requestMappings[0].containerName",
                    "FieldValueInvalid",
                    'Invalid value: "nope": must match the name of an entry in spec.initContainers.name or '
                    "spec.containers.name",
                )
            ],
        ),
        (
            {
                "resourceClaimName": "c",
                "requestMappings": [
                    {"containerName": "c", "resourceName": "example.com/other", "requestName": "r"}
                ],
            },
            [
                (
                    f"{ERCS}.requestMappings[0].resourceName",
                    "FieldValueInvalid",
                    'Invalid value: "example.com/other": must match the extended resource name of an entry '
                    "in spec.initContainers.resources.requests or spec.containers.resources.requests",
                )
            ],
        ),
        (
            {
                "resourceClaimName": "",
                "requestMappings": [{"containerName": "c", "resourceName": GPU, "requestName": "r"}],
            },
            [(f"{ERCS}.resourceClaimName", "FieldValueRequired", "Required value")],
        ),
    ],
)
def test_upstream_mapping_rules(webhook: Webhook, ercs: Obj, expected: list[tuple[str, str, str]]) -> None:
    old = gpu_pod()
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, ercs)))
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    assert causes(response) == expected


def test_request_name_errors_use_upstreams_unindexed_path(webhook: Webhook) -> None:
    old = gpu_pod()
    ercs = mapping("claim", request="Container_0")
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, ercs)))
    [(field, reason, message)] = causes(response)
    assert (field, reason) == (f"{ERCS}.requestName", "FieldValueInvalid")
    assert message.startswith('Invalid value: "Container_0": a lowercase RFC 1123 label must consist of')


def test_a_repeated_triple_gives_three_duplicates(webhook: Webhook) -> None:
    old = gpu_pod()
    ercs = mapping("claim")
    ercs["requestMappings"] *= 2
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, ercs)))
    assert [(f, r) for f, r, _ in causes(response)] == [
        (f"{ERCS}.requestMappings[1].containerName", "FieldValueDuplicate"),
        (f"{ERCS}.requestMappings[1].resourceName", "FieldValueDuplicate"),
        (f"{ERCS}.requestMappings[1].requestName", "FieldValueDuplicate"),
    ]


def test_an_invalid_claim_name_is_denied(webhook: Webhook) -> None:
    old = gpu_pod()
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, mapping("Bad_Name"))))
    [(field, _, message)] = causes(response)
    assert field == f"{ERCS}.resourceClaimName"
    assert message.startswith('Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain')


# --- UPDATE: who writes ------------------------------------------------------------------------


def _cluster_with_claim(p: Obj, **claim_args: Any) -> tuple[list[Obj], Obj]:
    claim = special_claim("p-extended-resources-abcde", p, **claim_args)
    return [*gpu_cluster(), claim], claim


def test_only_allowed_writers_may_set_the_mapping(webhook: Webhook) -> None:
    old = gpu_pod()
    objects, claim = _cluster_with_claim(old)
    webhook.install(objects)
    new = with_mapping(old, mapping(claim["metadata"]["name"]))
    response = webhook.respond(PATH, _status_update(old, new, user=USER))
    assert response["allowed"] is False
    assert response["status"] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "p" is forbidden: status.extendedResourceClaimStatus may only be written by the '
        'scheduler (draxr --allowed-writers), not by user "alice"',
        "reason": "Forbidden",
        "details": {"name": "p", "kind": "pods"},
        "code": 403,
    }
    for writer in (WORKER, SCHEDULER):
        assert webhook.respond(PATH, _status_update(old, new, user=writer))["allowed"] is True


def test_the_writer_list_is_configurable(webhook: Webhook) -> None:
    old = gpu_pod()
    objects, claim = _cluster_with_claim(old)
    webhook.install(objects, config=AdmissionConfig(allowed_writers=frozenset({"my-scheduler"})))
    new = with_mapping(old, mapping(claim["metadata"]["name"]))
    assert webhook.respond(PATH, _status_update(old, new, user="my-scheduler"))["allowed"] is True
    assert webhook.respond(PATH, _status_update(old, new, user=WORKER))["status"]["code"] == 403


def test_changing_the_mapping_through_the_main_resource_is_checked_too(webhook: Webhook) -> None:
    old = gpu_pod()
    new = with_mapping(old, mapping("x"))
    response = webhook.respond(PATH, _status_update(old, new, user=USER, sub_resource=""))
    assert response["status"]["code"] == 403


def test_clearing_the_mapping_is_a_write(webhook: Webhook) -> None:
    old = with_mapping(gpu_pod(), mapping("gone"))
    new = with_mapping(old, None)
    assert webhook.respond(PATH, _status_update(old, new, user=USER))["status"]["code"] == 403
    assert webhook.respond(PATH, _status_update(old, new, user=WORKER))["allowed"] is True


def test_an_empty_username_is_never_a_writer(webhook: Webhook) -> None:
    old = gpu_pod()
    webhook.install(config=AdmissionConfig(allowed_writers=frozenset({""})))
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, mapping("x")), user=""))
    assert response["status"]["code"] == 403


# --- UPDATE: the claim it names ----------------------------------------------------------------


def test_the_claim_must_exist_in_the_pods_namespace(webhook: Webhook) -> None:
    old = gpu_pod()
    elsewhere = special_claim("p-claim", old, namespace="other")
    webhook.install([*gpu_cluster(), elsewhere], config=AdmissionConfig(claim_wait_seconds=0))
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, mapping("p-claim"))))
    assert response["status"]["message"] == (
        'Pod "p" is invalid: status.extendedResourceClaimStatus.resourceClaimName: Invalid value: '
        '"p-claim": no ResourceClaim of this name in namespace "default"'
    )


@pytest.mark.parametrize(
    ("claim_args", "detail"),
    [
        ({"annotation": None}, "is not an extended resource claim"),
        ({"annotation": "yes"}, "is not an extended resource claim"),
    ],
)
def test_the_claim_must_carry_the_annotation(webhook: Webhook, claim_args: Obj, detail: str) -> None:
    old = gpu_pod()
    objects, claim = _cluster_with_claim(old, **claim_args)
    webhook.install(objects)
    response = webhook.respond(
        PATH, _status_update(old, with_mapping(old, mapping(claim["metadata"]["name"])))
    )
    assert response["allowed"] is False
    assert detail in response["status"]["message"]


NOT_THIS_PODS = [
    (
        f"{ERCS}.resourceClaimName",
        "FieldValueInvalid",
        'Invalid value: "p-extended-resources-abcde": the ResourceClaim\'s controller owner is not this '
        'Pod (uid "uid-p")',
    )
]


def test_the_claim_must_be_controlled_by_this_pod(webhook: Webhook) -> None:
    old = gpu_pod()
    stranger = gpu_pod("q")
    objects, claim = _cluster_with_claim(stranger)  # q's claim, p points at it
    webhook.install(objects)
    response = webhook.respond(
        PATH, _status_update(old, with_mapping(old, mapping(claim["metadata"]["name"])))
    )
    assert causes(response) == NOT_THIS_PODS


@pytest.mark.parametrize("api_version", ["v2", "apps/v1", None])
def test_the_claims_controller_must_be_a_v1_pod(webhook: Webhook, api_version: str | None) -> None:
    """Quota's ``getVerifiedPodUsage`` (and its owner index) count a special claim only under a
    controller ``v1`` ``Pod``: a claim owned by the pod's uid under another apiVersion is not its."""
    old = gpu_pod()
    objects, claim = _cluster_with_claim(old)
    ref = claim["metadata"]["ownerReferences"][0]
    if api_version is None:
        del ref["apiVersion"]
    else:
        ref["apiVersion"] = api_version
    webhook.install(objects)
    response = webhook.respond(
        PATH, _status_update(old, with_mapping(old, mapping(claim["metadata"]["name"])))
    )
    assert causes(response) == NOT_THIS_PODS


def test_every_request_name_must_be_in_the_claim(webhook: Webhook) -> None:
    old = gpu_pod()
    objects, claim = _cluster_with_claim(old)
    webhook.install(objects)
    ercs = mapping(claim["metadata"]["name"], request="container-0-request-7")
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, ercs)))
    assert causes(response) == [
        (
            f"{ERCS}.requestMappings[0].requestName",
            "FieldValueInvalid",
            'Invalid value: "container-0-request-7": no request of this name in ResourceClaim '
            '"p-extended-resources-abcde"',
        )
    ]


def test_a_mapped_request_must_be_a_positive_integer(webhook: Webhook) -> None:
    old = gpu_pod("p", "0")
    objects, claim = _cluster_with_claim(old)
    webhook.install(objects)
    response = webhook.respond(
        PATH, _status_update(old, with_mapping(old, mapping(claim["metadata"]["name"])))
    )
    [(field, reason, message)] = causes(response)
    assert (field, reason) == (f"spec.containers[0].resources.requests[{GPU}]", "FieldValueInvalid")
    assert message.startswith(
        'Invalid value: "0": must be a positive integer: the kubelet only hands devices'
    )


def test_a_claim_that_reaches_the_cache_late_is_waited_for(webhook: Webhook) -> None:
    old = gpu_pod()
    claim = special_claim("p-claim", old)
    cache = ClusterCache()  # fed by events, like informers
    for obj in gpu_cluster():
        cache.handle(obj["kind"], "ADDED", obj)
    webhook.install(cache=cache, config=AdmissionConfig(claim_wait_seconds=10))
    answers: list[Obj] = []
    request = _status_update(old, with_mapping(old, mapping("p-claim", request="container-0-request-1")))
    with webhook.server.client() as other:

        def send() -> None:
            answers.append(other.post(PATH, json=request).json()["response"])

        thread = threading.Thread(target=send)
        thread.start()
        thread.join(0.3)
        assert thread.is_alive(), "the hook answered before the claim existed"
        # The wait happens off the event loop: other requests are served meanwhile.
        assert webhook.client.get("/healthz").text == "ok"
        assert webhook.respond(PATH, review(gpu_pod("q", "0.5")))["allowed"] is False
        assert thread.is_alive()
        cache.handle("ResourceClaim", "ADDED", claim)
        thread.join(10)
    assert not thread.is_alive()
    assert answers[0]["allowed"] is True


def test_a_claim_that_never_comes_is_denied_after_the_wait(webhook: Webhook) -> None:
    old = gpu_pod()
    webhook.install(cache=ClusterCache(), config=AdmissionConfig(claim_wait_seconds=0.1))
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, mapping("p-claim"))))
    assert "no ResourceClaim of this name" in response["status"]["message"]


def test_a_snapshot_cache_is_not_waited_on(webhook: Webhook) -> None:
    old = gpu_pod()
    webhook.install(gpu_cluster(), config=AdmissionConfig(claim_wait_seconds=60))
    response = webhook.respond(PATH, _status_update(old, with_mapping(old, mapping("p-claim"))))
    assert response["allowed"] is False  # answered at once: the test would time out otherwise


def test_delete_and_connect_are_allowed(webhook: Webhook) -> None:
    old = gpu_pod("p", "0.5")
    assert webhook.respond(PATH, review(None, operation="DELETE", old=old))["allowed"] is True


# --- UPDATE: a live read when the cache misses ---------------------------------------------------


class LaggingCache:
    """The webhook's informer-fed cache on the API emulator, whose ResourceClaim watch then stops
    (every list and watch of claims fails): the API has what the cache never sees."""

    def __init__(self, em: Any) -> None:
        from webhook.kube.cache import WEBHOOK_KINDS
        from webhook.kube.client import KubeClient

        self.em = em
        self.cache = ClusterCache()
        self.cache.start(KubeClient(em.api_client()), WEBHOOK_KINDS)
        assert self.cache.wait_synced(WEBHOOK_KINDS, 10)
        em.inject(verbs=("list", "watch"), resource="resourceclaims", error=500)
        em.drop_watches()

    def review(self, old: Obj, new: Obj, wait: float = 10.0) -> Obj:
        from webhook.admission.app import ENDPOINTS
        from webhook.admission.blocking import MAY_BLOCK
        from webhook.admission.context import Context
        from webhook.admission.pods import review_pod
        from webhook.admission.review import parse_request

        ctx = Context.build(self.cache, AdmissionConfig(claim_wait_seconds=wait))
        (endpoint,) = [e for e in ENDPOINTS if e.path == PATH]
        token = MAY_BLOCK.set(True)
        try:
            verdict = review_pod(parse_request(_status_update(old, new), endpoint.expected), ctx)
        finally:
            MAY_BLOCK.reset(token)
        return {"allowed": verdict.allowed, "status": verdict.status or {}}


@pytest.fixture
def lagging() -> Any:
    from e2e.emulator import Emulator

    with Emulator() as em:
        for obj in gpu_cluster():
            em.create(
                {"DeviceClass": "deviceclasses", "Node": "nodes", "ResourceSlice": "resourceslices"}[
                    obj["kind"]
                ],
                obj,
            )
        lag = LaggingCache(em)
        try:
            yield lag
        finally:
            lag.cache.stop()


def test_a_claim_the_cache_has_not_seen_is_read_from_the_api(lagging: LaggingCache) -> None:
    """The scheduler creates the claim before it writes the mapping (upstream's write order), so
    the API has it: a live read answers at once, where waiting for a lagging watch denied a
    correct mapping after the wait."""
    old = gpu_pod()
    claim = lagging.em.create("resourceclaims", special_claim("p-claim", old), "default")
    assert lagging.cache.state.allocated.claims.get(("default", "p-claim")) is None
    answer = lagging.review(old, with_mapping(old, mapping(claim["metadata"]["name"])))
    assert answer["allowed"] is True
    assert any(r.verb == "get" and r.resource == "resourceclaims" for r in lagging.em.requests())


def test_a_mapping_naming_a_request_the_apis_claim_lacks_is_denied(lagging: LaggingCache) -> None:
    """No silent no-device pod: the kubelet would hand the container nothing for a request its
    claim does not have."""
    old = gpu_pod()
    lagging.em.create("resourceclaims", special_claim("p-claim", old), "default")
    answer = lagging.review(old, with_mapping(old, mapping("p-claim", request="container-0-request-7")))
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (
        'Pod "p" is invalid: status.extendedResourceClaimStatus.requestMappings[0].requestName: '
        'Invalid value: "container-0-request-7": no request of this name in ResourceClaim "p-claim"'
    )
    missing = lagging.review(old, with_mapping(old, mapping("p-other")), wait=0)
    assert missing["status"]["message"] == (
        'Pod "p" is invalid: status.extendedResourceClaimStatus.resourceClaimName: Invalid value: '
        '"p-other": no ResourceClaim of this name in namespace "default"'
    )

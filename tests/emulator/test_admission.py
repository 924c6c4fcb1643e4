"""Admission webhooks called over TLS, as kube-apiserver calls them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.emulator import Emulator

from .conftest import pod, status_of
from .webhook_server import WebhookServer

POD_CREATE = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]


def _hook(
    server: WebhookServer | None,
    path: str,
    name: str,
    *,
    rules: Any = None,
    url: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    config: dict[str, Any] = {"url": url or (server.url(path) if server else "")}
    if server is not None:
        config["caBundle"] = server.tls.ca_bundle
    hook = {
        "name": name,
        "clientConfig": config,
        "rules": rules or POD_CREATE,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
    hook.update(extra)
    return hook


def _install(emulator: Emulator, kind: str, name: str, *hooks: dict[str, Any]) -> None:
    resource = "mutatingwebhookconfigurations" if kind == "mutating" else "validatingwebhookconfigurations"
    emulator.create(resource, {"metadata": {"name": name}, "webhooks": list(hooks)})


@pytest.fixture
def hooks(webhook_server: WebhookServer) -> WebhookServer:
    webhook_server.clear()
    return webhook_server


def _error(exc: ApiException) -> dict[str, Any]:
    return status_of(exc)


def test_mutation_is_applied_and_the_review_is_complete(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    _install(emulator, "mutating", "m", _hook(hooks, "/mutate-label", "label.test.io"))
    created = core.create_namespaced_pod("default", pod(generate_name="web-"))
    assert created.metadata.labels == {"mutated-by": "hook"}
    [req] = hooks.log("/mutate-label")
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["requestKind"] == req["kind"]
    assert req["requestResource"] == req["resource"]
    assert req["operation"] == "CREATE"
    assert req["namespace"] == "default"
    assert req["name"] == ""  # generateName: the name is not known to mutating webhooks yet
    assert req["userInfo"] == {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert req["object"]["metadata"]["generateName"] == "web-"
    assert req["oldObject"] is None
    assert req["dryRun"] is False
    assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert req["uid"]


def test_denial_keeps_code_reason_and_details(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "validating", "v", _hook(hooks, "/deny", "deny.test.io"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("p"))
    body = _error(err.value)
    assert err.value.status == 403
    assert body["reason"] == "Forbidden"
    assert body["message"] == 'admission webhook "deny.test.io" denied the request: no pods today'
    assert body["details"] == {"causes": [{"field": "spec", "message": "nope"}]}
    assert emulator.find("pods", "p") is None


def test_denial_without_code_is_400(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "validating", "v", _hook(hooks, "/deny-plain", "plain.test.io"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("p"))
    assert err.value.status == 400
    assert (
        _error(err.value)["message"] == 'admission webhook "plain.test.io" denied the request: plain denial'
    )


def test_validating_webhooks_see_the_final_object(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    _install(emulator, "mutating", "m", _hook(hooks, "/mutate-label", "label.test.io"))
    _install(emulator, "validating", "v", _hook(hooks, "/echo", "echo.test.io"))
    core.create_namespaced_pod("default", pod(generate_name="web-"))
    [req] = hooks.log("/echo")
    assert req["object"]["metadata"]["labels"] == {"mutated-by": "hook"}
    assert req["name"].startswith("web-")
    assert req["object"]["metadata"]["uid"]


def test_warnings_become_warning_headers(emulator: Emulator, hooks: WebhookServer, core: Any) -> None:
    _install(emulator, "validating", "v", _hook(hooks, "/warn", "warn.test.io"))
    r = urllib3.PoolManager().request(
        "POST",
        emulator.url + "/api/v1/namespaces/default/pods",
        body=json.dumps(pod("p")).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert r.status == 201
    assert r.headers.getlist("Warning") == ['299 - "careful now"', '299 - "quoted \\"word\\""']
    # The official client does not choke and exposes them on *_with_http_info.
    created, status, headers = core.create_namespaced_pod_with_http_info("default", pod("q"))
    assert status == 201
    assert created.metadata.name == "q"
    assert "careful now" in headers["Warning"]


def test_match_conditions_select_and_errors_follow_failure_policy(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    cond = [
        {
            "name": "web-only",
            "expression": "has(object.metadata.labels) && object.metadata.labels['app'] == 'web'",
        }
    ]
    _install(emulator, "mutating", "m", _hook(hooks, "/mutate-label", "label.test.io", matchConditions=cond))
    assert (
        core.create_namespaced_pod("default", pod("web", labels={"app": "web"})).metadata.labels["mutated-by"]
        == "hook"
    )
    assert (
        "mutated-by"
        not in core.create_namespaced_pod("default", pod("db", labels={"app": "db"})).metadata.labels
    )
    broken = [{"name": "broken", "expression": "object.spec.noSuchField == 1"}]
    _install(emulator, "validating", "v-fail", _hook(hooks, "/echo", "fail.test.io", matchConditions=broken))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("x"))
    assert err.value.status == 500
    assert 'failed calling webhook "fail.test.io"' in _error(err.value)["message"]
    emulator.patch(
        "validatingwebhookconfigurations",
        "v-fail",
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}],
        patch_type="json",
    )
    core.create_namespaced_pod("default", pod("y"))
    assert hooks.log("/echo") == []


def test_request_variable_in_match_conditions(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    cond = [
        {"name": "worker", "expression": "request.userInfo.username.startsWith('system:serviceaccount:')"}
    ]
    _install(emulator, "validating", "v", _hook(hooks, "/deny", "deny.test.io", matchConditions=cond))
    core.create_namespaced_pod("default", pod("by-alice"))
    worker: Any = client.CoreV1Api(emulator.api_client("worker-token"))
    with pytest.raises(ApiException) as err:
        worker.create_namespaced_pod("default", pod("by-worker"))
    assert err.value.status == 403
    worker.api_client.close()


def test_failure_policy_on_unreachable_and_slow_webhooks(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    dead = _hook(hooks, "", "dead.test.io", url="https://127.0.0.1:1/x")
    _install(emulator, "validating", "dead", dead)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("a"))
    assert err.value.status == 500
    message = _error(err.value)["message"]
    assert message.startswith(
        'Internal error occurred: failed calling webhook "dead.test.io": failed to call webhook: Post'
    )
    emulator.delete("validatingwebhookconfigurations", "dead")
    _install(emulator, "validating", "dead-ignored", dead | {"failurePolicy": "Ignore"})
    core.create_namespaced_pod("default", pod("b"))
    emulator.delete("validatingwebhookconfigurations", "dead-ignored")
    _install(emulator, "validating", "slow", _hook(hooks, "/slow", "slow.test.io", timeoutSeconds=1))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("c"))
    assert err.value.status == 500
    assert "context deadline exceeded" in _error(err.value)["message"]


def test_bad_response_uid_is_a_call_failure(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "validating", "v", _hook(hooks, "/bad-uid", "uid.test.io"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("p"))
    assert err.value.status == 500
    assert "expected response.uid" in _error(err.value)["message"]


def test_dry_run_and_side_effects(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "mutating", "m", _hook(hooks, "/mutate-label", "label.test.io"))
    out = core.create_namespaced_pod("default", pod("dry"), dry_run="All")
    assert out.metadata.labels == {"mutated-by": "hook"}
    assert hooks.log("/mutate-label")[0]["dryRun"] is True
    assert emulator.find("pods", "dry") is None
    _install(emulator, "validating", "v", _hook(hooks, "/echo", "effects.test.io", sideEffects="Some"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("dry"), dry_run="All")
    assert err.value.status == 400
    assert _error(err.value)["message"] == 'admission webhook "effects.test.io" does not support dry run'
    core.create_namespaced_pod("default", pod("real"))
    assert hooks.log("/echo")[0]["dryRun"] is False


def test_reinvocation_if_needed(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    _install(
        emulator,
        "mutating",
        "a-config",
        _hook(hooks, "/mutate-a", "a.test.io", reinvocationPolicy="IfNeeded"),
    )
    _install(emulator, "mutating", "b-config", _hook(hooks, "/mutate-b", "b.test.io"))
    created = core.create_namespaced_pod("default", pod("p"))
    assert created.metadata.labels == {"b": "set"}
    assert created.metadata.annotations == {"a": "seen"}
    calls = hooks.log("/mutate-a")
    assert len(calls) == 2
    assert "labels" not in calls[0]["object"]["metadata"]
    assert calls[1]["object"]["metadata"]["labels"] == {"b": "set"}
    assert len(hooks.log("/mutate-b")) == 1


def test_no_reinvocation_without_the_policy(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    _install(
        emulator, "mutating", "a-config", _hook(hooks, "/mutate-a", "a.test.io", reinvocationPolicy="Never")
    )
    _install(emulator, "mutating", "b-config", _hook(hooks, "/mutate-b", "b.test.io"))
    core.create_namespaced_pod("default", pod("p"))
    assert len(hooks.log("/mutate-a")) == 1


def test_namespace_and_object_selectors(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    core.create_namespace({"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    by_ns = _hook(hooks, "/mutate-label", "ns.test.io", namespaceSelector={"matchLabels": {"team": "a"}})
    _install(emulator, "mutating", "m", by_ns)
    assert core.create_namespaced_pod("team-a", pod("p")).metadata.labels == {"mutated-by": "hook"}
    assert core.create_namespaced_pod("default", pod("p")).metadata.labels is None
    emulator.delete("mutatingwebhookconfigurations", "m")
    implicit = _hook(
        hooks,
        "/mutate-label",
        "implicit.test.io",
        namespaceSelector={
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["implicit"]}
            ]
        },
        objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    )
    _install(emulator, "mutating", "m2", implicit)
    assert core.create_namespaced_pod("implicit", pod("p")).metadata.labels == {"mutated-by": "hook"}
    assert core.create_namespaced_pod("implicit", pod("q", labels={"skip": "1"})).metadata.labels == {
        "skip": "1"
    }


def test_subresource_rules(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    rules = [
        {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"]}
    ]
    _install(emulator, "validating", "v", _hook(hooks, "/deny", "status.test.io", rules=rules))
    emulator.create("pods", pod("p"))
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"ok": "1"}}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running"}})
    assert err.value.status == 403
    emulator.create("pods", pod("b"))
    binding_rules = [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding"]}
    ]
    _install(emulator, "validating", "bind", _hook(hooks, "/echo", "bind.test.io", rules=binding_rules))
    emulator.bind("b", "node-1", admission=True)
    [req] = hooks.log("/echo")
    assert req["subResource"] == "binding"
    assert req["kind"]["kind"] == "Binding"
    assert req["object"]["target"]["name"] == "node-1"


def test_update_and_delete_reviews_carry_old_objects(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    rules = [
        {
            "operations": ["UPDATE", "DELETE"],
            "apiGroups": [""],
            "apiVersions": ["*"],
            "resources": ["*"],
            "scope": "Namespaced",
        }
    ]
    _install(emulator, "validating", "v", _hook(hooks, "/echo", "echo.test.io", rules=rules))
    emulator.create("pods", pod("p"))
    core.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    core.delete_namespaced_pod("p", "default")
    update, delete = hooks.log("/echo")
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["metadata"].get("labels") is None
    assert update["object"]["metadata"]["labels"] == {"a": "b"}
    assert update["options"]["kind"] == "UpdateOptions"
    assert delete["operation"] == "DELETE"
    assert delete["object"] is None
    assert delete["oldObject"]["metadata"]["name"] == "p"
    assert delete["options"]["kind"] == "DeleteOptions"


def test_service_client_config_resolves_to_loopback(
    core: Any, emulator: Emulator, hooks: WebhookServer
) -> None:
    hook = _hook(hooks, "/mutate-label", "svc.test.io")
    hook["clientConfig"] = {
        "service": {"namespace": "webhook-test", "name": "hooks", "path": "/mutate-label", "port": 443},
        "caBundle": hooks.tls.ca_bundle,
    }
    _install(emulator, "mutating", "m", hook | {"failurePolicy": "Fail"})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("unmapped"))
    assert "hooks.webhook-test.svc is not mapped" in _error(err.value)["message"]
    emulator.set_service("webhook-test", "hooks", "127.0.0.1", hooks.port)
    assert core.create_namespaced_pod("default", pod("mapped")).metadata.labels == {"mutated-by": "hook"}


def test_wrong_ca_fails_tls_verification(core: Any, emulator: Emulator, hooks: WebhookServer) -> None:
    from .webhook_server import make_tls

    other = make_tls(hooks.tls.cert_file.parent.parent)
    hook = _hook(hooks, "/echo", "tls.test.io")
    hook["clientConfig"]["caBundle"] = other.ca_bundle
    _install(emulator, "validating", "v", hook)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", pod("p"))
    assert err.value.status == 500
    assert "certificate verify failed" in _error(err.value)["message"].lower()
    assert hooks.log("/echo") == []


def test_direct_api_runs_admission_only_when_asked(emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "mutating", "m", _hook(hooks, "/mutate-label", "label.test.io"))
    assert emulator.create("pods", pod("plain"))["metadata"].get("labels") is None
    assert emulator.create("pods", pod("admitted"), admission=True)["metadata"]["labels"] == {
        "mutated-by": "hook"
    }


def test_token_identity_reaches_the_webhook(emulator: Emulator, hooks: WebhookServer) -> None:
    _install(emulator, "validating", "v", _hook(hooks, "/echo", "echo.test.io"))
    worker: Any = client.CoreV1Api(emulator.api_client("worker-token"))
    worker.create_namespaced_pod("default", pod("by-worker"))
    anonymous: Any = client.CoreV1Api(emulator.api_client())
    anonymous.create_namespaced_pod("default", pod("by-nobody"))
    first, second = hooks.log("/echo")
    assert first["userInfo"] == {
        "username": "system:serviceaccount:draxr-system:draxr-worker",
        "groups": ["system:serviceaccounts", "system:authenticated"],
    }
    assert second["userInfo"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
    worker.api_client.close()
    anonymous.api_client.close()

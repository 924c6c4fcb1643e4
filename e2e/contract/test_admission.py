"""Admission webhooks called over TLS: the review they get, how their answers and failures come back."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .backend import HOOKS, Api
from .support import missing, pod, status_of
from .webhook_server import WebhookServer, make_tls

POD_CREATE = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]


def hook(
    server: WebhookServer,
    path: str,
    name: str,
    *,
    rules: Any = None,
    url: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    config: dict[str, Any] = {"url": url or server.url(path), "caBundle": server.tls.ca_bundle}
    out = {
        "name": name,
        "clientConfig": config,
        "rules": rules or POD_CREATE,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    }
    out.update(extra)
    return out


def install(api: Api, kind: str, name: str, *hooks: dict[str, Any]) -> str:
    """A webhook configuration of this test's (``api.unique(name)``), in effect when this returns."""
    unique = api.unique(name)
    body = {"metadata": {"name": unique}, "webhooks": list(hooks)}
    admission = client.AdmissionregistrationV1Api(api.client())
    getattr(admission, f"create_{HOOKS[kind]}")(body)
    api.hooks_changed()
    return unique


def uninstall(api: Api, kind: str, name: str) -> None:
    admission = client.AdmissionregistrationV1Api(api.client())
    getattr(admission, f"delete_{HOOKS[kind]}")(name)
    api.hooks_changed()


def test_mutation_is_applied_and_the_review_is_complete(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "mutating", "m", hook(hooks, "/mutate-label", "label.test.io"))
    created = core.create_namespaced_pod(api.namespace, pod(generate_name="web-"))
    assert created.metadata.labels == {"mutated-by": "hook"}
    [req] = hooks.log("/mutate-label")
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["requestKind"] == req["kind"]
    assert req["requestResource"] == req["resource"]
    assert req["operation"] == "CREATE"
    assert req["namespace"] == api.namespace
    assert "name" not in req  # generateName: the name is not known to mutating webhooks yet
    assert {k: req["userInfo"][k] for k in ("username", "groups")} == api.user_info("admin")
    assert req["object"]["metadata"]["generateName"] == "web-"
    assert req["oldObject"] is None
    assert req["dryRun"] is False
    assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert req["uid"]


def test_denial_keeps_code_reason_and_details(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "validating", "v", hook(hooks, "/deny", "deny.test.io"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(api.namespace, pod("p"))
    body = status_of(err.value)
    assert err.value.status == 403
    assert body["reason"] == "Forbidden"
    assert body["message"] == 'admission webhook "deny.test.io" denied the request: no pods today'
    assert body["details"] == {"causes": [{"field": "spec", "message": "nope"}]}
    assert missing(core.read_namespaced_pod, "p", api.namespace)


def test_denial_without_code_is_400(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "validating", "v", hook(hooks, "/deny-plain", "plain.test.io"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(api.namespace, pod("p"))
    assert err.value.status == 400
    assert (
        status_of(err.value)["message"]
        == 'admission webhook "plain.test.io" denied the request: plain denial'
    )


def test_validating_webhooks_see_the_final_object(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "mutating", "m", hook(hooks, "/mutate-label", "label.test.io"))
    install(api, "validating", "v", hook(hooks, "/echo", "echo.test.io"))
    core.create_namespaced_pod(api.namespace, pod(generate_name="web-"))
    [req] = hooks.log("/echo")
    assert req["object"]["metadata"]["labels"] == {"mutated-by": "hook"}
    assert req["name"].startswith("web-")
    assert req["object"]["metadata"]["uid"]


def test_warnings_become_warning_headers(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "validating", "v", hook(hooks, "/warn", "warn.test.io"))
    r = api.http(
        "POST",
        f"/api/v1/namespaces/{api.namespace}/pods",
        body=pod("p"),
        headers={"Content-Type": "application/json"},
    )
    assert r.status == 201
    assert r.headers.getlist("Warning") == ['299 - "careful now"', '299 - "quoted \\"word\\""']
    # The official client does not choke and exposes them on *_with_http_info.
    created, status, headers = core.create_namespaced_pod_with_http_info(api.namespace, pod("q"))
    assert status == 201
    assert created.metadata.name == "q"
    assert "careful now" in headers["Warning"]


def test_match_conditions_select_and_errors_follow_failure_policy(
    api: Api, core: Any, hooks: WebhookServer
) -> None:
    ns = api.namespace
    cond = [
        {
            "name": "web-only",
            "expression": "has(object.metadata.labels) && object.metadata.labels['app'] == 'web'",
        }
    ]
    install(api, "mutating", "m", hook(hooks, "/mutate-label", "label.test.io", matchConditions=cond))
    assert (
        core.create_namespaced_pod(ns, pod("web", labels={"app": "web"})).metadata.labels["mutated-by"]
        == "hook"
    )
    assert "mutated-by" not in core.create_namespaced_pod(ns, pod("db", labels={"app": "db"})).metadata.labels
    broken = [{"name": "broken", "expression": "object.spec.noSuchField == 1"}]
    failing = install(
        api, "validating", "v-fail", hook(hooks, "/echo", "fail.test.io", matchConditions=broken)
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("x"))
    # An error evaluating a condition fails closed as Forbidden, naming the object, not the webhook.
    assert err.value.status == 403
    message = status_of(err.value)["message"]
    assert message.startswith(
        """pods "x" is forbidden: expression 'object.spec.noSuchField == 1' resulted in error: """
    )
    assert "noSuchField" in message.split("resulted in error: ", 1)[1]
    client.AdmissionregistrationV1Api(api.client()).patch_validating_webhook_configuration(
        failing, [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]
    )
    api.hooks_changed()
    core.create_namespaced_pod(ns, pod("y"))
    assert hooks.log("/echo") == []


def test_request_variable_in_match_conditions(api: Api, core: Any, hooks: WebhookServer) -> None:
    cond = [
        {"name": "worker", "expression": "request.userInfo.username.startsWith('system:serviceaccount:')"}
    ]
    install(api, "validating", "v", hook(hooks, "/deny", "deny.test.io", matchConditions=cond))
    core.create_namespaced_pod(api.namespace, pod("by-admin"))
    with pytest.raises(ApiException) as err:
        api.core("worker").create_namespaced_pod(api.namespace, pod("by-worker"))
    assert err.value.status == 403
    assert (
        status_of(err.value)["message"]
        == 'admission webhook "deny.test.io" denied the request: no pods today'
    )


def test_failure_policy_on_unreachable_and_slow_webhooks(api: Api, core: Any, hooks: WebhookServer) -> None:
    ns = api.namespace
    dead = hook(hooks, "", "dead.test.io", url="https://127.0.0.1:1/x")
    name = install(api, "validating", "dead", dead)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("a"))
    assert err.value.status == 500
    message = status_of(err.value)["message"]
    assert message.startswith(
        'Internal error occurred: failed calling webhook "dead.test.io": failed to call webhook: Post'
    )
    uninstall(api, "validating", name)
    name = install(api, "validating", "dead-ignored", dead | {"failurePolicy": "Ignore"})
    core.create_namespaced_pod(ns, pod("b"))
    uninstall(api, "validating", name)
    install(api, "validating", "slow", hook(hooks, "/slow", "slow.test.io", timeoutSeconds=1))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("c"))
    assert err.value.status == 500
    assert "context deadline exceeded" in status_of(err.value)["message"]


def test_bad_response_uid_is_a_call_failure(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "validating", "v", hook(hooks, "/bad-uid", "uid.test.io"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(api.namespace, pod("p"))
    assert err.value.status == 500
    assert "expected response.uid" in status_of(err.value)["message"]


def test_dry_run_and_side_effects(api: Api, core: Any, hooks: WebhookServer) -> None:
    """Webhooks are called on dry runs, told so: admissionregistration/v1 takes only webhooks whose
    side effects are none, or none on dry runs."""
    ns = api.namespace
    install(api, "mutating", "m", hook(hooks, "/mutate-label", "label.test.io"))
    out = core.create_namespaced_pod(ns, pod("dry"), dry_run="All")
    assert out.metadata.labels == {"mutated-by": "hook"}
    assert hooks.log("/mutate-label")[0]["dryRun"] is True
    assert missing(core.read_namespaced_pod, "dry", ns)
    admission: Any = client.AdmissionregistrationV1Api(api.client())
    name = api.unique("v")
    effects = hook(hooks, "/echo", "effects.test.io", sideEffects="Some")
    with pytest.raises(ApiException) as err:
        admission.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [effects]})
    assert err.value.status == 422
    assert status_of(err.value)["message"] == (
        f'ValidatingWebhookConfiguration.admissionregistration.k8s.io "{name}" is invalid: '
        'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"'
    )
    install(api, "validating", "v", hook(hooks, "/echo", "effects.test.io", sideEffects="NoneOnDryRun"))
    core.create_namespaced_pod(ns, pod("dry"), dry_run="All")
    core.create_namespaced_pod(ns, pod("real"))
    assert [r["dryRun"] for r in hooks.log("/echo")] == [True, False]


def test_reinvocation_if_needed(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "mutating", "a-config", hook(hooks, "/mutate-a", "a.test.io", reinvocationPolicy="IfNeeded"))
    install(api, "mutating", "b-config", hook(hooks, "/mutate-b", "b.test.io"))
    created = core.create_namespaced_pod(api.namespace, pod("p"))
    assert created.metadata.labels == {"b": "set"}
    assert created.metadata.annotations == {"a": "seen"}
    calls = hooks.log("/mutate-a")
    assert len(calls) == 2
    assert "labels" not in calls[0]["object"]["metadata"]
    assert calls[1]["object"]["metadata"]["labels"] == {"b": "set"}
    assert len(hooks.log("/mutate-b")) == 1


def test_no_reinvocation_without_the_policy(api: Api, core: Any, hooks: WebhookServer) -> None:
    install(api, "mutating", "a-config", hook(hooks, "/mutate-a", "a.test.io", reinvocationPolicy="Never"))
    install(api, "mutating", "b-config", hook(hooks, "/mutate-b", "b.test.io"))
    core.create_namespaced_pod(api.namespace, pod("p"))
    assert len(hooks.log("/mutate-a")) == 1


def test_namespace_and_object_selectors(api: Api, core: Any, hooks: WebhookServer) -> None:
    team = api.new_namespace("team-a", labels={"team": "a"})
    by_ns = hook(hooks, "/mutate-label", "ns.test.io", namespaceSelector={"matchLabels": {"team": "a"}})
    name = install(api, "mutating", "m", by_ns)
    assert core.create_namespaced_pod(team, pod("p")).metadata.labels == {"mutated-by": "hook"}
    assert core.create_namespaced_pod(api.namespace, pod("p")).metadata.labels is None
    uninstall(api, "mutating", name)
    implicit = api.new_namespace("implicit")
    by_name = hook(
        hooks,
        "/mutate-label",
        "implicit.test.io",
        namespaceSelector={
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [implicit]}
            ]
        },
        objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
    )
    install(api, "mutating", "m2", by_name)
    assert core.create_namespaced_pod(implicit, pod("p")).metadata.labels == {"mutated-by": "hook"}
    assert core.create_namespaced_pod(implicit, pod("q", labels={"skip": "1"})).metadata.labels == {
        "skip": "1"
    }


def test_subresource_rules(api: Api, core: Any, hooks: WebhookServer) -> None:
    ns = api.namespace
    rules = [
        {"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/status"]}
    ]
    install(api, "validating", "v", hook(hooks, "/deny", "status.test.io", rules=rules))
    core.create_namespaced_pod(ns, pod("p"))
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"ok": "1"}}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running"}})
    assert err.value.status == 403
    core.create_namespaced_pod(ns, pod("b"))
    binding_rules = [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/binding"]}
    ]
    install(api, "validating", "bind", hook(hooks, "/echo", "bind.test.io", rules=binding_rules))
    binding = {"metadata": {"name": "b"}, "target": {"kind": "Node", "name": "node-1"}}
    core.create_namespaced_pod_binding("b", ns, binding, _preload_content=False)
    [req] = hooks.log("/echo")
    assert req["subResource"] == "binding"
    assert req["kind"]["kind"] == "Binding"
    assert req["object"]["target"]["name"] == "node-1"


def test_update_and_delete_reviews_carry_old_objects(api: Api, core: Any, hooks: WebhookServer) -> None:
    ns = api.namespace
    rules = [
        {
            "operations": ["UPDATE", "DELETE"],
            "apiGroups": [""],
            "apiVersions": ["*"],
            "resources": ["*"],
            "scope": "Namespaced",
        }
    ]
    install(api, "validating", "v", hook(hooks, "/echo", "echo.test.io", rules=rules))
    core.create_namespaced_pod(ns, pod("p"))
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"a": "b"}}})
    core.delete_namespaced_pod("p", ns)
    # A pod's deletion is two writes (marked, then removed): validating webhooks see each (and a retried
    # write again), so one UPDATE and then DELETEs.
    update, delete, *more = hooks.log("/echo")
    assert [r["operation"] for r in more] == ["DELETE"] * len(more)
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["metadata"].get("labels") is None
    assert update["object"]["metadata"]["labels"] == {"a": "b"}
    assert update["options"]["kind"] == "UpdateOptions"
    assert delete["operation"] == "DELETE"
    assert delete["object"] is None
    assert delete["oldObject"]["metadata"]["name"] == "p"
    assert delete["options"]["kind"] == "DeleteOptions"


def test_wrong_ca_fails_tls_verification(api: Api, core: Any, hooks: WebhookServer) -> None:
    other = make_tls(api.tmp)
    wrong = hook(hooks, "/echo", "tls.test.io")
    wrong["clientConfig"]["caBundle"] = other.ca_bundle
    install(api, "validating", "v", wrong)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(api.namespace, pod("p"))
    assert err.value.status == 500
    assert "x509: certificate signed by unknown authority" in status_of(err.value)["message"]
    assert hooks.log("/echo") == []


def test_token_identity_reaches_the_webhook(api: Api, hooks: WebhookServer) -> None:
    install(api, "validating", "v", hook(hooks, "/echo", "echo.test.io"))
    api.core("worker").create_namespaced_pod(api.namespace, pod("by-worker"))
    [review] = hooks.log("/echo")
    assert {k: review["userInfo"][k] for k in ("username", "groups")} == api.user_info("worker")

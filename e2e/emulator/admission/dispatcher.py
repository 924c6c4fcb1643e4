"""Admission webhooks driven by the stored Mutating/ValidatingWebhookConfigurations.

Mutating webhooks run one after another (configurations sorted by name, webhooks in order) and
their JSONPatch responses are applied; a webhook with ``reinvocationPolicy: IfNeeded`` runs once more
if a later webhook changed the object. Validating webhooks then run concurrently. Denials, call
failures (with ``failurePolicy``) and warnings become what the apiserver returns. Every webhook is
called on dry runs too: admissionregistration/v1 allows only ``sideEffects`` None and NoneOnDryRun.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook.core.api.objects import Obj

from .. import errors
from .attributes import Attributes
from .client import CallError, WebhookClient
from .conditions import ConditionEvaluator
from .rules import NamespaceLabels, webhook_applies

#: Lists the stored configurations of one kind (``mutatingwebhookconfigurations``...).
ConfigSource = Callable[[str], list[Obj]]

MUTATING = "mutatingwebhookconfigurations.admissionregistration.k8s.io"
VALIDATING = "validatingwebhookconfigurations.admissionregistration.k8s.io"


@dataclass(frozen=True, slots=True)
class _Hook:
    webhook: Obj
    config: str

    @property
    def name(self) -> str:
        return str(self.webhook.get("name", ""))

    @property
    def ignore_failures(self) -> bool:
        return bool(self.webhook.get("failurePolicy", "Fail") == "Ignore")


def _hooks(configs: list[Obj]) -> list[_Hook]:
    ordered = sorted(configs, key=lambda c: c.get("metadata", {}).get("name", ""))
    return [
        _Hook(w, c["metadata"].get("name", ""))
        for c in ordered
        for w in (c.get("webhooks") or [])
        if isinstance(w, dict)
    ]


def _denied(hook: _Hook, response: Obj) -> errors.ApiError:
    """``webhookerrors.ToStatusErr``: the webhook's status with the apiserver's message prefix."""
    status = response.get("status") if isinstance(response.get("status"), dict) else {}
    assert isinstance(status, dict)
    code = status.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    denied_by = f'admission webhook "{hook.name}" denied the request'
    message, reason = status.get("message"), status.get("reason")
    if message:
        text = f"{denied_by}: {message}"
    elif reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    details = status.get("details") if isinstance(status.get("details"), dict) else None
    return errors.ApiError(code, str(reason or ""), text, details)


def _call_failed(hook: _Hook, why: str) -> errors.ApiError:
    return errors.internal(f'failed calling webhook "{hook.name}": {why}')


class AdmissionChain:
    """The webhook admission plugins (MutatingAdmissionWebhook, ValidatingAdmissionWebhook)."""

    def __init__(
        self, configs: ConfigSource, namespace_labels: NamespaceLabels, client: WebhookClient
    ) -> None:
        self._configs = configs
        self._namespace_labels = namespace_labels
        self._client = client
        self._conditions = ConditionEvaluator()

    def _matching(self, kind: str, attrs: Attributes) -> list[_Hook]:
        configs = self._configs(kind)
        if not configs:
            return []
        return [h for h in _hooks(configs) if webhook_applies(h.webhook, attrs, self._namespace_labels)]

    def _conditions_allow(self, hook: _Hook, attrs: Attributes, cache: dict[str, Any]) -> bool:
        conditions = hook.webhook.get("matchConditions")
        if not conditions:
            return True
        if "activation" not in cache:
            cache["activation"] = self._conditions.activation(attrs)
        outcome = self._conditions.evaluate(conditions, cache["activation"])
        if outcome.error:
            if hook.ignore_failures:
                return False
            # Upstream fails closed with a Forbidden naming the resource, not as a call failure.
            rt = attrs.rt
            raise errors.forbidden_request(rt.group, rt.plural, attrs.name, outcome.error)
        return outcome.matched

    async def _call(self, hook: _Hook, attrs: Attributes) -> Obj | None:
        """The webhook's ``response``; None when the call failed and failurePolicy is Ignore."""
        review = attrs.review()
        try:
            answer = await self._client.call(hook.webhook, review)
            response = answer.get("response")
            if answer.get("apiVersion") != "admission.k8s.io/v1" or answer.get("kind") != "AdmissionReview":
                raise CallError(
                    f"received invalid webhook response: expected admission.k8s.io/v1 AdmissionReview, "
                    f"got {answer.get('apiVersion')}/{answer.get('kind')}"
                )
            if not isinstance(response, dict):
                raise CallError("received invalid webhook response: response is missing")
            if response.get("uid") != attrs.uid:
                raise CallError(f"expected response.uid={attrs.uid!r}, got {response.get('uid')!r}")
            if not isinstance(response.get("allowed"), bool):
                raise CallError("received invalid webhook response: allowed must be a bool")
        except CallError as exc:
            if hook.ignore_failures:
                return None
            raise _call_failed(hook, str(exc)) from None
        for warning in response.get("warnings") or []:
            if isinstance(warning, str) and warning not in attrs.warnings:
                attrs.warnings.append(warning)
        if not response["allowed"]:
            raise _denied(hook, response)
        return response

    async def mutate(self, attrs: Attributes) -> None:
        """Run mutating webhooks, applying their patches to ``attrs.obj`` (replaced, never mutated)."""
        hooks = self._matching(MUTATING, attrs)
        if not hooks:
            return
        cache: dict[str, Any] = {}
        changes = 0
        seen_at: dict[int, int] = {}  # hook index -> change count right after its last call
        for i, hook in enumerate(hooks):
            if not self._conditions_allow(hook, attrs, cache):
                continue
            if await self._mutate_once(hook, attrs):
                changes += 1
                cache.clear()
            seen_at[i] = changes
        again = [
            i
            for i, hook in enumerate(hooks)
            if i in seen_at and hook.webhook.get("reinvocationPolicy") == "IfNeeded" and seen_at[i] < changes
        ]
        for i in again:
            await self._mutate_once(hooks[i], attrs)

    async def _mutate_once(self, hook: _Hook, attrs: Attributes) -> bool:
        response = await self._call(hook, attrs)
        if response is None or not response.get("patch") or attrs.obj is None:
            return False
        if response.get("patchType") != "JSONPatch":
            raise _call_failed(hook, f"unsupported patch type {response.get('patchType')!r}")
        try:
            ops = json.loads(base64.b64decode(response["patch"], validate=True))
            patched = jsonpatch.JsonPatch(ops).apply(attrs.obj)
        except (
            binascii.Error,
            ValueError,
            TypeError,
            KeyError,
            jsonpatch.JsonPatchException,
            jsonpatch.JsonPointerException,
        ) as exc:
            raise errors.internal(
                f'admission webhook "{hook.name}" returned an invalid patch: {exc}'
            ) from None
        if not isinstance(patched, dict):
            raise errors.internal(f'admission webhook "{hook.name}" patched the object into a non-object')
        if patched == attrs.obj:
            return False
        attrs.obj = patched
        return True

    async def validate(self, attrs: Attributes) -> None:
        """Run validating webhooks concurrently; the first denial (in webhook order) wins."""
        hooks = self._matching(VALIDATING, attrs)
        if not hooks:
            return
        cache: dict[str, Any] = {}
        called = [h for h in hooks if self._conditions_allow(h, attrs, cache)]
        results = await asyncio.gather(*(self._call(h, attrs) for h in called), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

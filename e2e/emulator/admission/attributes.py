"""What admission knows about one request, and the ``AdmissionReview`` built from it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from webhook.core.api.objects import Obj

from ..auth import UserInfo
from ..resources import ResourceType


@dataclass(slots=True)
class Attributes:
    """``admission.Attributes``: operation, resource, object(s), user, dryRun and options."""

    operation: str  # CREATE, UPDATE, DELETE
    rt: ResourceType
    subresource: str
    name: str
    namespace: str
    obj: Obj | None
    old: Obj | None
    user: UserInfo
    dry_run: bool
    options: Obj | None = None
    #: ``(group, version, kind)`` of ``obj``; the resource's kind unless a subresource has its own.
    kind: tuple[str, str, str] | None = None
    #: Warnings returned by webhooks, in order (the handler turns them into ``Warning`` headers).
    warnings: list[str] = field(default_factory=list)
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def gvk(self) -> tuple[str, str, str]:
        return self.kind or (self.rt.group, self.rt.version, self.rt.kind)

    def request(self, *, with_objects: bool = True) -> Obj:
        """``AdmissionRequest`` (admission.k8s.io/v1) for this call."""
        group, version, kind = self.gvk
        gvk = {"group": group, "version": version, "kind": kind}
        gvr = {"group": self.rt.group, "version": self.rt.version, "resource": self.rt.plural}
        req: Obj = {
            "uid": self.uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "operation": self.operation,
            "userInfo": self.user.as_dict(),
            "dryRun": self.dry_run,
        }
        if self.name:  # omitted while a generateName create has none yet
            req["name"] = self.name
        if self.subresource:
            req["subResource"] = self.subresource
            req["requestSubResource"] = self.subresource
        if self.namespace:
            req["namespace"] = self.namespace
        if with_objects:
            req["object"] = self.obj
            req["oldObject"] = self.old
        req["options"] = self.options
        return req

    def review(self) -> Obj:
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": self.request()}

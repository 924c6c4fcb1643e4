"""Which DeviceClass backs an extended resource name (upstream ``ExtendedResourceCache``).

Every class is reachable through its implicit name ``deviceclass.resource.kubernetes.io/<class>``.
An explicit name (``spec.extendedResourceName``, or draxr's annotation
``draxr.io/extended-resource-name`` where the apiserver drops the field) shared by several classes
resolves, state-free, to the newest class (``creationTimestamp``), then the lexicographically
smaller name, so deleting or renaming the winner promotes the runner-up.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..api.constants import DEVICE_CLASS_PREFIX, EXTENDED_RESOURCE_NAME_ANNOTATION
from ..api.objects import Obj, annotations_of, meta, name, parse_time, spec
from ..api.tolerations import class_tolerations


def explicit_name(device_class: Obj) -> str | None:
    """``spec.extendedResourceName``, else draxr's annotation (where the apiserver drops the field)."""
    value = spec(device_class).get("extendedResourceName")
    if isinstance(value, str) and value:
        return value
    noted = annotations_of(device_class).get(EXTENDED_RESOURCE_NAME_ANNOTATION)
    return noted if isinstance(noted, str) and noted else None


def _preference(device_class: Obj) -> tuple[float, list[int]]:
    # Newest first, then smaller name: sort descending on (timestamp, inverted name).
    created = parse_time(meta(device_class).get("creationTimestamp")).timestamp()
    return created, [-ord(c) for c in name(device_class)]


class ClassResolver:
    """Resource name -> DeviceClass, kept in step with the set of classes."""

    def __init__(self, classes: Iterable[Obj] = ()) -> None:
        self._classes: dict[str, Obj] = {}
        self._claimants: dict[str, set[str]] = {}  # explicit name -> class names declaring it
        self._winner: dict[str, str] = {}
        self._tolerations: dict[str, list[Obj]] = {}  # class -> its extended resource's tolerations
        for dc in classes:
            self.upsert(dc)

    # -- updates ---------------------------------------------------------------------------

    def upsert(self, device_class: Obj) -> None:
        cname = name(device_class)
        if not cname:
            return
        old = self._classes.get(cname)
        old_name = explicit_name(old) if old is not None else None
        self._classes[cname] = device_class
        tolerations = class_tolerations(device_class)
        if tolerations:
            self._tolerations[cname] = tolerations
        else:
            self._tolerations.pop(cname, None)
        new_name = explicit_name(device_class)
        if old_name is not None and old_name != new_name:
            self._claimants[old_name].discard(cname)
            self._recompute(old_name)
        if new_name is not None:
            self._claimants.setdefault(new_name, set()).add(cname)
            self._recompute(new_name)

    def remove(self, class_name: str) -> None:
        old = self._classes.pop(class_name, None)
        self._tolerations.pop(class_name, None)
        if old is None:
            return
        old_name = explicit_name(old)
        if old_name is not None:
            self._claimants[old_name].discard(class_name)
            self._recompute(old_name)

    def _recompute(self, resource_name: str) -> None:
        names = self._claimants.get(resource_name)
        if not names:
            self._claimants.pop(resource_name, None)
            self._winner.pop(resource_name, None)
            return
        self._winner[resource_name] = max(names, key=lambda n: _preference(self._classes[n]))

    # -- queries ---------------------------------------------------------------------------

    def get(self, class_name: str) -> Obj | None:
        return self._classes.get(class_name)

    def classes(self) -> list[Obj]:
        return [self._classes[n] for n in sorted(self._classes)]

    def resolve(self, resource_name: str) -> Obj | None:
        """``GetDeviceClass``: the class backing ``resource_name``, or None."""
        if resource_name.startswith(DEVICE_CLASS_PREFIX):
            return self._classes.get(resource_name[len(DEVICE_CLASS_PREFIX) :])
        winner = self._winner.get(resource_name)
        return self._classes[winner] if winner is not None else None

    def tolerations(self, class_name: str) -> list[Obj]:
        """The tolerations draxr puts on every request it writes for the class's extended resource
        (``draxr.io/extended-resource-tolerations``, ``api/tolerations.py``); never mutate them."""
        return self._tolerations.get(class_name, [])

    def field_name(self, class_name: str) -> str | None:
        """``GetExtendedResource``: the class's ``spec.extendedResourceName`` as the apiserver stores
        it (draxr's annotation is not the apiserver's; quota reads only the field)."""
        value = spec(self._classes.get(class_name)).get("extendedResourceName")
        return value if isinstance(value, str) and value else None

    def class_name(self, resource_name: str) -> str | None:
        dc = self.resolve(resource_name)
        return name(dc) if dc is not None else None

    def contenders(self, resource_name: str) -> list[Obj]:
        """Every class declaring ``resource_name`` explicitly, the winner first."""
        names = self._claimants.get(resource_name, set())
        ranked = sorted((self._classes[n] for n in names), key=_preference, reverse=True)
        return ranked

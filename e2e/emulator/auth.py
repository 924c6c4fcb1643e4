"""Authentication: bearer tokens map to a user; no token is the anonymous user (no authorization)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors

ANONYMOUS = "system:anonymous"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """``authentication.k8s.io/v1 UserInfo``, as it appears in ``AdmissionReview.request.userInfo``."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.username, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS_USER = UserInfo(ANONYMOUS, ("system:unauthenticated",))


def authenticated(username: str, groups: Iterable[str] = (), uid: str = "") -> UserInfo:
    """A user as the token authenticator builds it: ``system:authenticated`` is always added."""
    gs = tuple(groups)
    if "system:authenticated" not in gs:
        gs = (*gs, "system:authenticated")
    return UserInfo(username, gs, uid)


TokenSpec = tuple[str, Iterable[str]] | str | UserInfo


class Authenticator:
    """Resolves an ``Authorization`` header; an unknown token is 401, like a real token authenticator."""

    def __init__(self, tokens: Mapping[str, TokenSpec] | None = None) -> None:
        self._tokens: dict[str, UserInfo] = {}
        for token, spec in (tokens or {}).items():
            self.add(token, spec)

    def add(self, token: str, spec: TokenSpec) -> None:
        if isinstance(spec, UserInfo):
            user = spec
        elif isinstance(spec, str):
            user = authenticated(spec)
        else:
            name, groups = spec
            user = authenticated(name, groups)
        self._tokens = {**self._tokens, token: user}

    def authenticate(self, header: str | None) -> UserInfo:
        if not header:
            return ANONYMOUS_USER
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.unauthorized()
        user = self._tokens.get(token.strip())
        if user is None:
            raise errors.unauthorized()
        return user

"""Paged lists as client-go's pager makes them (``limit``/``continue``).

A continue token the server no longer honours (410 Expired: the list's resourceVersion was
compacted between pages) starts the list over; after ``MAX_EXPIRED_PAGES`` such restarts in a row,
one unpaged list, as client-go's pager falls back to. A 410 on a list's first page is the server's
answer about the list itself, not an expired token: it is raised to the caller.

Each page's items go through ``transform`` before the next page is read, so a caller that keeps
less than the server sends (the informers' trim) never holds a whole list as it was sent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..core.api.objects import Obj
from .client import ApiError, KubeClient
from .resources import Resource
from .trim import Transform

#: Restarts of a paged list whose continue token expired, before one unpaged list.
MAX_EXPIRED_PAGES = 3

log = logging.getLogger("draxr.pager")


@dataclass
class Listing:
    """A whole list: its items (transformed), the resourceVersion to watch from, the pages read
    (restarted lists included) and how many times the list started over."""

    items: list[Obj]
    resource_version: str
    pages: int
    restarts: int


def list_all(
    client: KubeClient,
    res: Resource,
    *,
    page_size: int,
    namespace: str | None = None,
    field_selector: str | None = None,
    transform: Transform | None = None,
) -> Listing:
    """Every object of ``res`` (in ``namespace``, or everywhere) in pages of ``page_size`` (0: one
    unpaged list); ApiError for what a restart does not cure."""
    pages = restarts = 0
    while True:
        size = page_size if restarts < MAX_EXPIRED_PAGES else 0
        items: list[Obj] = []
        token = ""
        try:
            while True:
                listing = client.list(
                    res,
                    namespace,
                    field_selector=field_selector,
                    limit=size or None,
                    continue_token=token or None,
                )
                pages += 1
                for item in listing.get("items") or []:
                    if isinstance(item, dict):
                        items.append(transform(item) if transform is not None else item)
                meta = listing.get("metadata") or {}
                token = str(meta.get("continue") or "")
                if not token:
                    return Listing(items, str(meta.get("resourceVersion", "")), pages, restarts)
        except ApiError as e:
            if not (e.gone and token):
                raise
            restarts += 1
            log.info(
                "list of %s expired between pages; listing again from the start",
                res.plural,
                extra={"reason": e.message or e.reason},
            )

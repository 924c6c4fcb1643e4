"""PATCH bodies by content type: JSON patch, merge patch, strategic merge patch and apply patch."""

from __future__ import annotations

from typing import Any

import jsonpatch

from . import codec, errors
from .mergepatch import merge_patch
from .strategicpatch import PatchError, strategic_merge

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)

#: The short names the Python API accepts for ``patch_type``.
ALIASES = {"json": JSON_PATCH, "merge": MERGE_PATCH, "strategic": STRATEGIC_PATCH, "apply": APPLY_PATCH}


def media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` header without parameters, lower-cased."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode_patch(patch_type: str, body: bytes) -> Any:
    """Parse the body of a PATCH; 415 for an unknown type, 400 for a malformed body."""
    if patch_type not in PATCH_TYPES:
        raise errors.unsupported_media_type(patch_type, PATCH_TYPES)
    try:
        if patch_type == APPLY_PATCH:
            doc = codec.decode_yaml(body)
        else:
            doc = codec.decode(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise errors.bad_request(f"error decoding patch: {exc}") from None
    if patch_type == JSON_PATCH:
        if not isinstance(doc, list):
            raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    elif not isinstance(doc, dict):
        raise errors.bad_request("error decoding patch: the patch must be a JSON object")
    return doc


def apply_patch(patch_type: str, current: dict[str, Any], patch: Any) -> dict[str, Any]:
    """The object ``current`` becomes under ``patch`` (neither is mutated)."""
    if patch_type == JSON_PATCH:
        try:
            result = jsonpatch.JsonPatch(patch).apply(current)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise errors.unprocessable(
                f"the server rejected our request due to an error in our request: {exc}"
            ) from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise errors.unprocessable(str(exc)) from None
        except (TypeError, KeyError, AttributeError, ValueError, IndexError) as exc:
            raise errors.bad_request(f"invalid JSON patch: {exc}") from None
    elif patch_type == MERGE_PATCH:
        result = merge_patch(current, patch)
    else:
        try:
            result = strategic_merge(current, patch)
        except PatchError as exc:
            raise errors.bad_request(str(exc)) from None
    if not isinstance(result, dict):
        raise errors.unprocessable("the patched document is not a JSON object")
    return result

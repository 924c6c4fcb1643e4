import io
import json
import logging

from webhook.runtime import logs


def test_json_lines_with_context_fields() -> None:
    out = io.StringIO()
    logs.setup("info", out)
    log = logging.getLogger("draxr.worker")
    log.info("bound", extra={"pod": "default/p", "node": "n", "claim": "p-extended-resources-x"})
    log.debug("hidden")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", extra={"pod": "default/q"})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["bound", "failed"]
    assert lines[0]["pod"] == "default/p"
    assert lines[0]["node"] == "n"
    assert lines[0]["claim"] == "p-extended-resources-x"
    assert lines[0]["level"] == "info"
    assert "ValueError: boom" in lines[1]["exception"]

"""Bad input over HTTP: each refused with a named kind and the right status, store unchanged."""

import http.client
import json

import pytest

pytestmark = pytest.mark.backends("sqlite")  # above the store: see conftest's backend matrix


def post(daemon, path, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=30)
    conn.request("POST", path, body, headers or {"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def seq(daemon):
    return post(daemon, "/v1/stats", b"{}")[1]["result"]["seq"]


@pytest.mark.parametrize(
    "path, body, status, kind",
    [
        ("/v1/assert", b"this is not json", 400, "not-json"),
        ("/v1/assert", b'\xff\xfe{"sentence": 1}', 400, "not-json"),
        ("/v1/assert", b'{"sentence": "(p a)", "context": "CxA"', 400, "not-json"),
        ("/v1/assert", b"[1, 2]", 400, "bad-request"),
        ("/v1/assert", b'{"sentence": 42, "context": "CxA"}', 400, "bad-request"),
        ("/v1/assert", b'{"sentence": "(p a)"}', 400, "bad-request"),
        (
            "/v1/assert",
            b'{"sentence": "(p a)", "context": "CxA", "colour": "red"}',
            400,
            "unknown-option",
        ),
        ("/v1/retract", b'{"handle": "seven"}', 400, "bad-handle"),
        ("/v1/edit", b'{"add": "(p a)"}', 400, "bad-request"),
        (
            "/v1/edit",
            b'{"add": [{"sentence": "(p a)", "context": "CxA", "x": 1}]}',
            400,
            "unknown-option",
        ),
        ("/v1/query", b'{"goal": {"a": 1}, "context": "CxA"}', 400, "bad-request"),
        ("/v1/nothing-here", b"{}", 404, "not-found"),
        (
            "/v1/assert",
            json.dumps(
                {"sentence": "(p " + "(f " * 70 + "a" + ")" * 71, "context": "CxA"}
            ).encode(),
            400,
            "shape",
        ),
        (
            "/v1/assert",
            json.dumps({"sentence": '(p "' + "x" * (1 << 20) + '")', "context": "CxA"}).encode(),
            400,
            "shape",
        ),
        ("/v1/assert", b"[" * 100_000 + b"]" * 100_000, 400, "not-json"),
    ],
    ids=[
        "not-json",
        "invalid-utf8",
        "truncated-json",
        "not-an-object",
        "wrong-type",
        "missing-field",
        "unknown-field",
        "handle-not-int",
        "add-not-a-list",
        "entry-unknown-option",
        "goal-wrong-type",
        "unknown-route",
        "deeply-nested-sentence",
        "huge-string",
        "deeply-nested-json",
    ],
)
def test_bad_requests_are_refused_by_name(daemon, path, body, status, kind):
    before = seq(daemon)
    got_status, reply = post(daemon, path, body)
    assert (got_status, reply["ok"], reply["error"]["kind"]) == (status, False, kind)
    assert reply["error"]["message"]
    assert seq(daemon) == before


def test_a_20_mib_body_is_413(daemon):
    body = json.dumps({"sentence": "(p a)", "context": "CxA", "pad": "x" * (20 << 20)}).encode()
    status, reply = post(daemon, "/v1/assert", body)
    assert status == 413 and reply["error"]["kind"] == "body-too-large"


def test_no_stack_trace_leaks_from_an_internal_error(daemon):
    # an empty body on an operation that needs fields is a refusal, not a crash
    status, reply = post(daemon, "/v1/assert", b"")
    assert status == 400 and "Traceback" not in json.dumps(reply)

"""Issue 16, points 3-6: bodies built to hurt each route get a clear 4xx quickly, and the service
goes on answering; a snapshot built to hurt start-up gets a clear error.

Each test names the reproduction it guards: a 50,000-deep document, a 16,000-digit quantity,
a 400 MB body, Unicode digits, a 3,000-deep cohort chain, too many flavors, terminal escapes
in the text views, millions of node names.
"""
from __future__ import annotations

import subprocess

import orjson
import pytest
import yaml

from app.api.limits import MAX_JSON_ITEMS, OTHER_BODY, VERB_BODY
from app.api.wire import MAX_NODES
from app.cli import build_from_snapshot
from app.objects.quantity import MAX_QUANTITY_TEXT, QuantityError, parse_quantity
from app.objects.errors import InvalidObject
from app.objects.kueue import decode_cluster_queue
from app.state.tree import MAX_COHORT_DEPTH
from app.sync.snapshot import SnapshotError
from serving import QUOTIENT_BIN
from test_bad_input import NODES, SNAPSHOT, fingerprint
from builders import Pod, extender_args

KUEUE = "kueue.x-k8s.io/v1beta1"


CLUSTER = SNAPSHOT         # the conftest's ext fixture builds it


async def _still_serving(client) -> None:
    pod = Pod("after-attack").queue("q").cpu("1").wire()
    r = await client.post("/filter", json=extender_args(pod, NODES))
    assert r.status_code == 200 and r.json()["NodeNames"] == NODES, r.text


# ---- point 3: deeply nested documents --------------------------------------------------------------

@pytest.mark.parametrize("content_type,body", [
    ("application/json", b"[" * 50_000),
    ("application/yaml", b"[" * 50_000),
    ("application/yaml", b"- " * 50_000 + b"x"),
    ("application/json", b'{"a":' * 50_000),
])
async def test_a_50000_deep_document_to_explain_is_a_400(ext, api, content_type, body):
    async with api(ext) as client:
        r = await client.post("/debug/explain", content=body, headers={"Content-Type": content_type})
        assert r.status_code == 400, r.text
        assert r.json()["error"].startswith("explain: ")
        assert len(r.text) < 1000
        await _still_serving(client)


@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt", "bind"])
async def test_a_50000_deep_document_to_a_verb_is_a_400(ext, api, verb):
    async with api(ext) as client:
        r = await client.post(f"/{verb}", content=b"[" * 50_000)
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"], r.text
        await _still_serving(client)


@pytest.mark.parametrize("name,text", [("deep.json", "[" * 50_000), ("deep.yaml", "- " * 50_000 + "x")])
def test_a_50000_deep_snapshot_is_a_clear_error_at_start(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SnapshotError, match="depth|nesting"):
        build_from_snapshot(str(path))
    done = subprocess.run([str(QUOTIENT_BIN), "serve", "--snapshot", str(path), "--port", "1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])     # not 139 (a segfault)
    assert str(path) in done.stderr and "Traceback" not in done.stderr


# ---- point 4 and 6: quantities ---------------------------------------------------------------------

def test_a_16000_digit_quantity_is_refused_by_its_length_with_a_short_message():
    with pytest.raises(QuantityError) as e:
        parse_quantity("1" * 16_000 + "x", "cpu")
    message = str(e.value)
    assert f"longer than {MAX_QUANTITY_TEXT} characters" in message and len(message) < 200


def test_a_long_bad_quantity_within_the_length_is_still_refused():
    """The pattern itself: digits then a bad character (what backtracked quadratically before)."""
    for text in ("1" * (MAX_QUANTITY_TEXT - 1) + "x", "1." + "1" * 60 + "x", "9" * 40 + "Kix"):
        with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
            parse_quantity(text, "memory")


@pytest.mark.parametrize("text", ["١٢", "１２", "१२", "12٫5", "٣Gi", "1e٣"])
def test_unicode_digits_are_not_quantities(text):
    """Python's \\d matches Arabic-Indic, full-width and Devanagari digits; Kubernetes takes ASCII only."""
    with pytest.raises(QuantityError):
        parse_quantity(text, "cpu")


@pytest.mark.parametrize("value", ["1" * 16_000 + "x", "١٢"])
@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt", "explain"])
async def test_a_hostile_quantity_is_a_400_on_every_route_that_reads_a_pod(ext, api, verb, value):
    pod = Pod("hostile").queue("q").cpu("1").wire()
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = value
    async with api(ext) as client:
        before = fingerprint(ext.state)
        if verb == "explain":
            r = await client.post("/debug/explain", json=pod)
        elif verb == "preempt":
            r = await client.post("/preempt", json={"Pod": pod, "NodeNameToMetaVictims": {}})
        else:
            r = await client.post(f"/{verb}", json=extender_args(pod, NODES))
        assert r.status_code == 400, r.text
        assert "cpu" in r.json()["error"] and len(r.text) < 1000          # the value is not echoed whole
        assert fingerprint(ext.state) == before
        await _still_serving(client)


# ---- point 5: body size, refused before reading ----------------------------------------------------

class Chunks:
    """A request body that counts how much of it the server pulled."""

    def __init__(self, total: int, chunk: int = 64 * 1024):
        self.total, self.chunk, self.sent = total, chunk, 0

    async def __aiter__(self):
        while self.sent < self.total:
            self.sent += self.chunk
            yield b"a" * self.chunk


@pytest.mark.parametrize("path,limit", [("/debug/explain", OTHER_BODY), ("/filter", VERB_BODY),
                                        ("/bind", VERB_BODY), ("/debug/queues", OTHER_BODY)])
async def test_a_body_declared_too_large_is_refused_before_a_byte_is_read(ext, api, path, limit):
    body = Chunks(400 * 2**20)
    async with api(ext) as client:
        r = await client.post(path, content=body, headers={"Content-Length": str(400 * 2**20)})
        assert r.status_code == 413, r.text
        assert r.json()["error"].endswith(f"body larger than {limit} bytes")
        assert body.sent == 0
        await _still_serving(client)


@pytest.mark.parametrize("path,limit", [("/debug/explain", OTHER_BODY), ("/filter", VERB_BODY)])
async def test_a_streamed_body_is_refused_as_soon_as_it_passes_the_limit(ext, api, path, limit):
    body = Chunks(400 * 2**20)                    # chunked: no Content-Length to refuse it by
    async with api(ext) as client:
        r = await client.post(path, content=body)
        assert r.status_code == 413, r.text
        assert limit < body.sent <= limit + body.chunk          # read no further than the limit
        await _still_serving(client)


async def test_a_filter_with_more_node_names_than_any_cluster_is_a_400(ext, api):
    pod = Pod("many").queue("q").cpu("1").wire()
    async with api(ext) as client:
        r = await client.post("/filter", json=extender_args(pod, [f"n{i}" for i in range(MAX_NODES + 1)]))
        assert r.status_code == 400 and f"more than the {MAX_NODES:,}" in r.json()["error"], r.text
        await _still_serving(client)


async def test_a_verb_body_with_millions_of_items_is_refused_before_decoding(ext, api):
    """2 million one-letter node names fit in the byte limit but would hold the loop for a quarter second."""
    pod = Pod("millions").queue("q").cpu("1").wire()
    body = orjson.dumps(extender_args(pod, ["a"] * 2_000_000))
    assert len(body) < VERB_BODY
    async with api(ext) as client:
        r = await client.post("/filter", content=body)
        assert r.status_code == 413 and f"more than {MAX_JSON_ITEMS:,} JSON items" in r.json()["error"], r.text
        await _still_serving(client)


# ---- point 6: cohort depth, flavor counts, terminal escapes -----------------------------------------

def _cohort_chain(depth: int) -> str:
    docs = [{"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}}]
    for i in range(depth):
        docs.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": f"c{i}"},
                     "spec": {"parentName": f"c{i - 1}"} if i else {}})
    for name, cohort in (("deep-cq", f"c{depth - 1}"), ("shallow-cq", f"c{MAX_COHORT_DEPTH - 1}")):
        docs.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
                     "spec": {"cohort": cohort, "namespaceSelector": {}, "resourceGroups": [
                         {"coveredResources": ["cpu"],
                          "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}})
    return yaml.safe_dump_all(docs)


async def test_a_3000_deep_cohort_chain_makes_its_queue_inactive_with_a_reason(load_extender, api):
    ext = load_extender(_cohort_chain(3000))
    reason = ext.state.tree.inactive["deep-cq"]
    assert f"more than {MAX_COHORT_DEPTH} parentName levels" in reason and "c2999" in reason
    assert "shallow-cq" not in ext.state.tree.inactive          # at the limit still works
    async with api(ext) as client:
        for path in ("/debug/queues", "/debug/queues?format=text", "/debug/queues/deep-cq?format=text"):
            r = await client.get(path)
            assert r.status_code == 200, (path, r.text[-500:])
        assert "parentName levels" in (await client.get("/debug/queues/deep-cq")).json()["statusReason"]


def _cq_with(groups: int, flavors: int, resources: int = 1) -> dict:
    covered = [f"r{i}" for i in range(resources)]
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "wide"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [
                {"coveredResources": [f"g{g}-{r}" for r in covered],
                 "flavors": [{"name": f"g{g}-f{f}", "resources": [{"name": f"g{g}-{r}", "nominalQuota": "1"}
                                                                  for r in covered]} for f in range(flavors)]}
                for g in range(groups)]}}


@pytest.mark.parametrize("groups,flavors,resources,mention", [
    (17, 1, 1, "spec.resourceGroups has 17 items; Kueue allows at most 16"),
    (1, 65, 1, "resourceGroups[0].flavors has 65 items; Kueue allows at most 64"),
    (1, 1, 65, "resourceGroups[0].coveredResources has 65 items; Kueue allows at most 64"),
    (5, 60, 1, "300 flavors across resourceGroups; Kueue allows at most 256"),
])
def test_more_flavors_or_groups_than_kueue_allows_is_invalid(groups, flavors, resources, mention):
    with pytest.raises(InvalidObject, match=mention.replace("[", r"\[").replace("]", r"\]")):
        decode_cluster_queue(_cq_with(groups, flavors, resources))


def test_kueue_limits_themselves_are_accepted():
    assert len(decode_cluster_queue(_cq_with(16, 16)).resource_groups) == 16
    assert len(decode_cluster_queue(_cq_with(1, 64, 64)).resource_groups[0].flavors) == 64


async def test_text_views_show_terminal_escapes_as_text(ext, api):
    name = "evil\x1b]0;owned\x07\x1b[2J\u202e"
    pod = Pod("plain").queue("q").cpu("1").wire()
    pod["metadata"]["name"] = name
    async with api(ext) as client:
        r = await client.post("/debug/explain?format=text", json=pod)
        assert r.status_code == 200, r.text
        assert "\x1b" not in r.text and "\x07" not in r.text and "\u202e" not in r.text
        assert "evil\\x1b]0;owned\\x07\\x1b[2J\\u202e" in r.text
        missing = await client.get("/debug/queues/q%1B%5B31m?format=text")      # percent-encoded ESC
        assert missing.status_code == 404 and "\x1b" not in missing.text and "\\x1b[31m" in missing.text

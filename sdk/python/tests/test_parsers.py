"""Table tests of the parsers of untrusted bytes in actgate_host: the gate's decisions, the
vendor blocks' arguments, server-sent events and streamed message events. Bad input is a clear
error (HostLoopError, ValueError, StreamError), never another exception and never an allow."""

from __future__ import annotations

import json
import random
import unittest

from actgate_host import AnthropicStream, Client, Decision, HostLoopError, StreamError, call_arguments, sse_events
from actgate_host.client import _error_of


class DecisionTest(unittest.TestCase):
    def test_allow_only_when_unambiguous(self) -> None:
        cases = [
            ({"allow": True}, True),
            ({"allow": True, "operation_id": "op1", "authority_id": "a1", "state": "DISPATCH_PENDING"}, True),
            ({"allow": True, "code": "EF_POLICY_DENIED"}, False),
            ({"allow": True, "replayed": True}, False),
            ({"allow": False}, False),
            ({}, False),
            ({"code": "EF_ESCALATION_REQUIRED", "binding_moments": ["m1"], "binding_moment": {"a": 1}}, False),
            ({"allow": True, "unknown_member_of_a_later_version": 1}, True),
        ]
        for obj, want in cases:
            with self.subTest(obj=obj):
                self.assertIs(Decision.from_json(obj).allow, want)

    def test_bad_decisions(self) -> None:
        bad = [
            None, [], "allow", 1, True,
            {"allow": "true"}, {"allow": 1}, {"allow": None}, {"allow": []},
            {"allow": True, "code": 5}, {"allow": True, "operation_id": {}}, {"binding_moments": "m1"},
            {"binding_moments": [1]}, {"binding_moment": "x"}, {"deny": []}, {"resolutions": {}},
            {"replayed": "yes"}, {"retryable": 0},
        ]
        for obj in bad:
            with self.subTest(obj=obj):
                with self.assertRaises(HostLoopError) as cm:
                    Decision.from_json(obj)
                self.assertEqual(cm.exception.code, "HOSTLOOP_BAD_RESPONSE")

    def test_escalated(self) -> None:
        d = Decision.from_json({"code": "EF_ESCALATION_REQUIRED", "binding_moments": ["m1"], "envelope_digest": "sha256:x"})
        self.assertTrue(d.escalated)
        self.assertFalse(Decision.from_json({"code": "EF_POLICY_DENIED"}).escalated)

    def test_random_json_never_allows_wrongly(self) -> None:
        rnd = random.Random(26)
        atoms = [None, True, False, 0, 1, -1, 1.5, "", "x", "EF_POLICY_DENIED", [], {}, ["m"], {"a": 1}]
        keys = ["allow", "code", "replayed", "operation_id", "binding_moments", "binding_moment", "deny", "resolutions", "result", "zz"]
        for _ in range(3000):
            obj = {k: rnd.choice(atoms) for k in rnd.sample(keys, rnd.randint(0, len(keys)))}
            try:
                d = Decision.from_json(obj)
            except HostLoopError:
                continue
            if d.allow:
                self.assertIs(obj.get("allow"), True)
                self.assertFalse(obj.get("code"))
                self.assertFalse(obj.get("replayed"))

    def test_error_bodies(self) -> None:
        self.assertEqual(_error_of({"error": {"code": "HOSTLOOP_SETTLED", "message": "m"}}, 409), ("HOSTLOOP_SETTLED", "m"))
        self.assertEqual(_error_of(None, 401)[0], "HOSTLOOP_UNAUTHENTICATED")
        self.assertEqual(_error_of("text", 502)[0], "HOSTLOOP_UNAVAILABLE")
        self.assertEqual(_error_of({"error": "x"}, 400)[0], "HOSTLOOP_BAD_REQUEST")
        self.assertEqual(_error_of({"error": {"code": 7}}, 404)[0], "HOSTLOOP_BAD_REQUEST")


class ClientArgsTest(unittest.TestCase):
    def test_bad_construction(self) -> None:
        for kw in [dict(base_url="file:///etc/passwd"), dict(base_url="127.0.0.1:8787"), dict(base_url="http://"),
                   dict(base_url="http://u:p@127.0.0.1:8787"), dict(base_url="http://127.0.0.1:8787/?x=1"),
                   dict(base_url="http://127.0.0.1:8787", token=""), dict(base_url="http://127.0.0.1:8787", token="a\r\nX-Evil: 1"),
                   dict(base_url="http://127.0.0.1:8787", timeout=0), dict(base_url="http://127.0.0.1:8787", timeout="5")]:
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                Client(**kw)

    def test_bad_requests_refused_before_sending(self) -> None:
        c = Client("http://127.0.0.1:9", timeout=0.2)  # nothing is sent for these
        for args, kw in [(({"type": "tool_use"},), dict(vendor="gemini")), (({"type": "tool_use"},), dict(provenance="web")),
                         (("not json",), {}), (([1, 2],), {}), ((b"\xff",), {})]:
            with self.subTest(args=args, kw=kw), self.assertRaises((ValueError, UnicodeDecodeError)):
                c.enforce(*args, **kw)
        with self.assertRaises(ValueError):
            c.complete("", "executed")
        with self.assertRaises(ValueError):
            c.complete("op", "maybe")
        with self.assertRaises(ValueError):
            c.complete("op", "executed", float("nan"))


class ArgumentsTest(unittest.TestCase):
    def test_arguments(self) -> None:
        self.assertEqual(call_arguments({"input": {"a": 1}}, "anthropic"), {"a": 1})
        self.assertEqual(call_arguments({"function": {"arguments": '{"a":1}'}}, "openai"), {"a": 1})
        self.assertEqual(call_arguments({"arguments": ""}, "openai-responses"), {})
        bad = [({"input": [1]}, "anthropic"), ({"input": "x"}, "anthropic"), ({}, "anthropic"),
               ({"function": {"arguments": '{"a":1,"a":2}'}}, "openai"), ({"function": {"arguments": "[1]"}}, "openai"),
               ({"function": {"arguments": '{"a":NaN}'}}, "openai"), ({"function": {"arguments": 5}}, "openai"),
               ({"function": "x"}, "openai"), ({"arguments": "{"}, "openai-responses"), ({}, "openai-responses")]
        for blk, vendor in bad:
            with self.subTest(blk=blk), self.assertRaises(ValueError):
                call_arguments(blk, vendor)


def ev(t, **kw):
    return dict(type=t, **kw)


class StreamTest(unittest.TestCase):
    def start(self):
        s = AnthropicStream()
        s.feed(ev("message_start", message={"id": "m", "content": []}))
        s.feed(ev("content_block_start", index=0, content_block={"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}))
        return s

    def test_block_only_at_stop(self) -> None:
        s = self.start()
        self.assertEqual(s.feed(ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": '{"a":'})), [])
        self.assertEqual(s.complete_tool_uses(), [])
        self.assertEqual(s.feed(ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "1}"})), [])
        self.assertEqual(s.complete_tool_uses(), [])
        out = s.feed(ev("content_block_stop", index=0))
        self.assertEqual(out, [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}}])
        self.assertEqual(s.complete_tool_uses(), out)

    def test_empty_input_is_empty_object(self) -> None:
        s = self.start()
        self.assertEqual(s.feed(ev("content_block_stop", index=0))[0]["input"], {})

    def test_bad_streams(self) -> None:
        bad = [
            [ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": '{"a":'}), ev("content_block_stop", index=0)],
            [ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": '{"a":1,"a":2}'}), ev("content_block_stop", index=0)],
            [ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "[1]"}), ev("content_block_stop", index=0)],
            [ev("content_block_delta", index=5, delta={"type": "input_json_delta", "partial_json": "{}"})],
            [ev("content_block_stop", index=0), ev("content_block_stop", index=0)],
            [ev("content_block_start", index=7, content_block={"type": "text"})],
            [ev("content_block_start", index=1, content_block="x")],
            [ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": 5})],
            [ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "x" * ((1 << 20) + 1)})],
            [ev("error", error={"type": "overloaded_error"})],
        ]
        for events in bad:
            with self.subTest(events=str(events)[:120]), self.assertRaises(StreamError):
                s = self.start()
                for e in events:
                    s.feed(e)
        with self.assertRaises(StreamError):
            AnthropicStream().feed(ev("message_start", message="x"))

    def test_random_events_only_stream_errors(self) -> None:
        rnd = random.Random(9)
        kinds = ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop", "ping", "error", 5, None]
        vals = [None, 0, 1, -1, "x", {}, [], {"type": "tool_use", "id": "t"}, {"type": "input_json_delta", "partial_json": "{"},
                {"type": "input_json_delta", "partial_json": "}"}, {"type": "text_delta", "text": "t"}, {"content": []}]
        for _ in range(2000):
            s = AnthropicStream()
            for _ in range(rnd.randint(1, 12)):
                e = {"type": rnd.choice(kinds), "index": rnd.choice([0, 1, "0", None]), "delta": rnd.choice(vals),
                     "content_block": rnd.choice(vals), "message": rnd.choice(vals)}
                try:
                    for blk in s.feed(e):
                        self.assertIsInstance(blk["input"], dict)
                except StreamError:
                    break


class IncompleteMessageTest(unittest.TestCase):
    def test_cut_off_blocks_never_enforced(self) -> None:
        """A message still streaming (stop_reason null) runs nothing; with max_tokens the last
        tool_use is not run. The client points at a closed port: an enforce attempt would be
        'unavailable', so 'denied' shows none was made, and the tool is never called."""
        from actgate_host import run_anthropic
        ran = []
        c = Client("http://127.0.0.1:9", timeout=0.5)
        blocks = [{"type": "tool_use", "id": f"toolu_{i}", "name": "t", "input": {"i": i}} for i in range(2)]
        outs = run_anthropic(c, {"content": blocks, "stop_reason": None}, {"t": ran.append})
        self.assertEqual([o.status for o in outs], ["denied", "denied"])
        outs = run_anthropic(c, {"content": blocks, "stop_reason": "max_tokens"}, {"t": ran.append})
        self.assertEqual([o.status for o in outs], ["unavailable", "denied"])
        self.assertEqual(outs[1].tool_result["tool_use_id"], "toolu_1")
        self.assertIn("EF_ACT_INVALID", outs[1].tool_result["content"][0]["text"])
        self.assertEqual(ran, [])


class SSETest(unittest.TestCase):
    def test_events(self) -> None:
        lines = ["event: ping\n", "data: {\"type\":\"ping\"}\n", "\n", ": comment\n", "data: {\"type\":\n", "data: \"x\"}\n", "\n", "data: [1]\n", "\n"]
        self.assertEqual(list(sse_events(lines)), [{"type": "ping"}, {"type": "x"}])
        self.assertEqual(list(sse_events([b"data: {\"a\":1}\r\n"])), [{"a": 1}])
        with self.assertRaises(StreamError):
            list(sse_events(["data: {\n", "\n"]))


if __name__ == "__main__":
    unittest.main()

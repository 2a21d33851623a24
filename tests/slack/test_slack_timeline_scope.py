"""A thread's timeline stays in its channel (issue 37): `/kafka timeline C0OPS/<ts>` sent from another
channel posted the whole incident and both files there. Over signed HTTP against the Slack stand-in:
from another channel it is refused privately, with nothing posted or uploaded there; from the
thread's own channel it is answered with its files."""

from __future__ import annotations

import json

from slack_harness import INCIDENTS, OPS, Harness


async def _wait(h: Harness, event: str, n: int) -> list[dict]:
    await h.stand.wait_for(lambda: len(h.audit(event)) >= n, timeout_s=60)
    await h.bot.drain(60)
    return h.audit(event)


async def test_a_threads_timeline_is_refused_in_another_channel_and_answered_in_its_own(stand, tmp_path):
    h = Harness(stand, tmp_path)
    h.router = None  # the real command registry
    await h.start_bot()
    try:
        status, _, _ = await h.slash("why URP")
        assert status == 200
        root = (await _wait(h, "answer", 1))[0]["thread_ts"]
        posted, uploads = len(stand.called("chat.postMessage")), len(stand.uploads())

        status, _, _ = await h.slash(f"timeline {OPS}/{root}", channel=INCIDENTS)
        assert status == 200
        refusal = (await _wait(h, "refusal", 1))[0]
        assert refusal["step"] == "scope" and refusal["channel"] == INCIDENTS and refusal["user"] == "U0ALICE"
        said = json.dumps([c.args for c in stand.calls], ensure_ascii=False)
        assert f"That thread is in channel {OPS}: its timeline is shown only there" in said
        assert len(stand.called("chat.postMessage")) == posted, "nothing is posted in the other channel"
        assert len(stand.uploads()) == uploads, "no file is uploaded there"
        assert [a["command"] for a in h.audit("answer")] == ["why"]

        status, _, _ = await h.slash(f"timeline {OPS}/{root}", channel=OPS)
        assert status == 200
        answers = await _wait(h, "answer", 2)
        assert answers[1]["command"] == "timeline" and answers[1]["outcome"] == "answered"
        await stand.wait_for(lambda: len(stand.uploads()) > uploads, timeout_s=30)
        assert all(c.args.get("channel_id") == OPS for c in stand.uploads()[uploads:])
    finally:
        await h.close()

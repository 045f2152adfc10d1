"""cancel's DeleteOptions: foreground propagation and the UID precondition (sent on stdin, so not in the call log)."""
from __future__ import annotations

from taobank.platforms.kubernetes.objects import delete_options


def test_cancel_deletes_foreground_and_only_the_recorded_uid():
    body = delete_options("1234-abcd")
    assert body["propagationPolicy"] == "Foreground"
    assert body["preconditions"] == {"uid": "1234-abcd"}
    assert body["kind"] == "DeleteOptions"

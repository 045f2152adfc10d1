"""Issue 38 item 6: raw terminal sequences from a cluster, an engine or a job never reach the terminal by default:
error lines (run_main), logs (``--raw`` keeps the job's bytes), the sweep table; one place cleans them
(:func:`taobank.text.one_line`)."""
from __future__ import annotations

import pytest

from taobank import records
from taobank.campaign import sweeps
from taobank.cli.entry import run_main
from taobank.text import error_line, one_line, terminal_text
from taobank.errors import TaoError
from taobank.states import State

ESCAPES = ["\x1b[2J", "\x1b]0;owned\x07", "\x9b31m", "\r", "\x08", "\x1bP+q\x1b\\", "\u202e", "\x00"]


@pytest.mark.parametrize("seq", ESCAPES)
def test_an_error_quoting_a_cluster_answer_is_escaped(capsys, seq):
    def main(argv):
        raise TaoError(f"listing /r failed (exit 1): find: ./{seq}name: Permission denied")

    with pytest.raises(SystemExit):
        run_main(main, [])
    err = capsys.readouterr().err
    assert seq not in err and err.count("\n") == 1 and err.startswith("error: listing /r failed")


def test_an_os_error_naming_a_file_is_escaped(capsys):
    def main(argv):
        raise PermissionError(13, "Permission denied", "/tmp/\x1b[31mred")

    with pytest.raises(SystemExit):
        run_main(main, [])
    assert "\x1b" not in capsys.readouterr().err


def test_the_cleaning_keeps_line_ends_and_tabs_and_masks_in_errors():
    assert terminal_text("a\tb\x1b[2J\nc\r\n") == "a\tb\\x1b[2J\nc\n"
    assert one_line("a\nb") == "a\\nb"
    assert "nvapi-" not in error_line("bad nvapi-" + "Zx9_" * 8)


def _docker_rec(jid: str) -> dict:
    rec = records.open_record("docker", "img:1", "custom", "run", "A", f"/tmp/r/{jid}", job_id=jid,
                              backend={"engine": "docker", "container": jid, "results_dir": f"/tmp/r/{jid}"})
    return records.mark(jid, State.RUNNING, backend_ref="abc123def456")


def test_logs_are_escaped_by_default_and_raw_on_request(fake, cli):
    rec = _docker_rec("job-a-000001")
    fake.on("docker", lambda c: c.argv[1] != "logs", "[]")
    fake.on("docker", lambda c: c.argv[1] == "logs", "epoch 1\x1b]0;owned\x07\tok\n", stderr="")
    out = cli("tao_jobs.py", "logs", rec["id"])
    assert out.rc == 0 and "\x1b" not in out.out and "\x07" not in out.out and "epoch 1\\x1b]0;owned\\x07\tok" in out.out, out
    raw = cli("tao_jobs.py", "logs", rec["id"], "--raw")
    assert raw.rc == 0 and "\x1b]0;owned\x07" in raw.out, raw


def test_the_sweep_table_escapes_every_cell():
    rows = [sweeps.Row(0, "job-a-000001", {"train.optim.lr\x1b[2J": "0.1"}, "RUNNING", "3/10\x1b]0;x\x07",
                       {"val\x1b[31m": 0.5})]
    text = sweeps.table(rows)
    assert "\x1b" not in text and "\x07" not in text and text.count("\n") == 2


def test_a_table_cleaned_in_one_call_is_cleaned_as_each_cell_alone():
    from taobank.text import one_lines

    cells = ["plain", "a\x1b[2Jb", "x\ny", 7, None, "token=nvapi-" + "k" * 40, "caf\udce9", "tab\there"]
    assert one_lines(cells) == [one_line(c) for c in cells]
    assert one_lines([]) == []

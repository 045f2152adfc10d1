"""taobank.progress: TAO's status.json read into progress, a KPI series, its renderings and plots.

Fixtures are written the way TAO's StatusLogger writes them: ``json.dumps`` per
line, date and time without zero padding, eta/time_per_epoch as ``str(timedelta)``.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import types
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taobank.errors import TaoError, UsageError
from taobank.progress import (
    best, format_seconds, kpi_names, parse, parse_timedelta, plot_png, plot_terminal, progress, series, table,
    to_csv, to_json)
from taobank.progress import statusfile
from taobank.progress.plot import _lines as plot_lines

WHEN = datetime(2025, 3, 7, 9, 5, 3)


def status_line(status: str, *, at: datetime = WHEN, message: str | None = None, kpi: dict | None = None,
                epoch: int | None = None, max_epoch: int | None = None, step: int | None = None,
                max_step: int | None = None, eta: timedelta | None = None, tpe: timedelta | None = None) -> str:
    data: dict = {"date": f"{at.month}/{at.day}/{at.year}", "time": f"{at.hour}:{at.minute}:{at.second}",
                  "status": status, "verbosity": "INFO"}
    if message is not None:
        data["message"] = message
    for key, value in (("epoch", epoch), ("max_epoch", max_epoch), ("step", step), ("max_step", max_step)):
        if value is not None:
            data[key] = value
    if eta is not None:
        data["eta"] = str(eta)
    if tpe is not None:
        data["time_per_epoch"] = str(tpe)
    if kpi is not None:
        data["kpi"] = kpi
    return json.dumps(data)


def epoch_line(epoch: int, max_epoch: int = 10, **kpi: float) -> str:
    return status_line("RUNNING", epoch=epoch, max_epoch=max_epoch, step=epoch * 100, max_step=max_epoch * 100,
                       eta=timedelta(seconds=75.5) * (max_epoch - epoch), tpe=timedelta(seconds=75.5),
                       at=WHEN + timedelta(minutes=epoch), kpi=kpi or None)


def text_of(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


# ---------------------------------------------------------------- progress
def test_real_format_gives_the_progress_of_the_last_line():
    text = text_of(status_line("STARTED", message="Starting Training"),
                   epoch_line(0, 9, train_loss=0.9), epoch_line(1, 9, train_loss=0.7, val_loss=0.8),
                   epoch_line(2, 9, train_loss=0.412, val_loss=0.6, mAP=0.31))
    p = progress(parse(text))
    # stored as TAO writes them (0-based, max_epoch the last index), shown from 1
    assert (p.status, p.epoch, p.max_epoch, p.step, p.max_step) == ("RUNNING", 2, 9, 200, 900)
    assert p.eta == pytest.approx(7 * 75.5) and p.time_per_epoch == pytest.approx(75.5)
    assert p.kpis == {"train_loss": 0.412, "val_loss": 0.6, "mAP": 0.31}
    assert p.last_update == "3/7/2025 9:7:3"
    assert p.line() == "epoch 3/10 eta 0:08:48 train_loss=0.412 val_loss=0.6 mAP=0.31"
    assert json.loads(json.dumps(p.to_dict())) == {
        "status": "RUNNING", "message": None, "epoch": 2, "max_epoch": 9, "step": 200, "max_step": 900,
        "eta": pytest.approx(528.5), "time_per_epoch": 75.5, "kpis": p.kpis, "last_update": "3/7/2025 9:7:3"}


def test_the_final_status_keeps_the_last_epoch_and_drops_the_eta():
    text = text_of(epoch_line(9, 9, train_loss=0.1), status_line("SUCCESS", message="Training finished"))
    p = progress(parse(text))
    assert (p.status, p.message, p.epoch) == ("SUCCESS", "Training finished", 9)
    assert p.line() == "SUCCESS epoch 10/10 train_loss=0.1"


def test_taos_own_success_line_reads_as_success_and_a_later_note_keeps_it():
    """TAO ends a good training with a RUNNING line, never a SUCCESS status; a cloud upload note may follow."""
    done = status_line("RUNNING", message="Train finished successfully.", kpi={"train_loss": 0.1})
    upload = status_line("RUNNING", message="Job artifacts in results dir are being uploaded to the cloud",
                         kpi={"train_loss": 0.1})
    for lines in ([done], [done, upload]):
        log = parse(text_of(epoch_line(9, 9, train_loss=0.1), *lines))
        assert progress(log).status == "SUCCESS" and progress(log).line().startswith("SUCCESS epoch 10/10")
        assert statusfile.outcome(log) == ("SUCCESS", "Train finished successfully.")
    running = parse(text_of(epoch_line(3, 9), status_line("RUNNING", message="Training loop in progress")))
    assert statusfile.outcome(running) is None and progress(running).status == "RUNNING"
    failed = parse(text_of(epoch_line(3, 9), status_line("FAILURE", message="File system error: x")))
    assert statusfile.outcome(failed) == ("FAILURE", "File system error: x")


def test_a_retry_that_starts_after_an_early_failure_is_a_run_of_its_own():
    log = parse(text_of(status_line("STARTED"), status_line("FAILURE", message="Configuration error: x"),
                        status_line("STARTED", message="Starting DINO train.")))
    assert statusfile.outcome(log) is None and progress(log).status == "STARTED"


def test_the_step_form_stands_in_when_no_epoch_was_written():
    text = text_of(status_line("RUNNING", step=120, max_step=1000, kpi={"loss": 2.5}))
    assert progress(parse(text)).line() == "step 120/1000 loss=2.5"
    assert progress(parse(text_of(status_line("RUNNING", step=7)))).line() == "step 7"


def test_nothing_known_gives_an_empty_line_and_many_kpis_are_cut():
    assert progress(parse("")).line() == ""
    kpis = {f"k{i}": i for i in range(11)}
    line = progress(parse(text_of(status_line("RUNNING", epoch=0, kpi=kpis)))).line()
    assert line.endswith("k7=7 (+3 more)") and line.startswith("epoch 1 ")


def test_a_nan_kpi_is_shown_and_is_strict_json():
    text = text_of(status_line("RUNNING", epoch=0, kpi={"loss": float("nan"), "big": float("inf")}))
    p = progress(parse(text))
    assert p.line() == "epoch 1 loss=nan big=inf"
    assert json.loads(json.dumps(p.to_dict(), allow_nan=False))["kpis"] == {"loss": "nan", "big": "inf"}


def test_fields_of_the_wrong_type_are_absent_not_errors():
    line = json.dumps({"status": "RUNNING", "epoch": "3", "max_epoch": True, "step": -1, "max_step": 1e300,
                       "eta": "soon", "time_per_epoch": [1], "message": {"a": 1},
                       "kpi": {"ok": "0.5", "flag": True, "deep": {"x": 1}, "": 1, "bad\x1bname": 2, "n": None}})
    p = progress(parse(line))
    assert (p.epoch, p.max_epoch, p.step, p.max_step, p.eta, p.time_per_epoch, p.message) == (None,) * 7
    assert p.kpis == {"ok": 0.5}


def test_a_message_is_one_printable_line_of_bounded_length():
    p = progress(parse(status_line("FAILURE", message="boom\n\x1b[31mred\x1b[0m " + "x" * 1000)))
    assert "\n" not in p.message and "\x1b" not in p.message
    assert len(p.message) == statusfile.MAX_MESSAGE and p.message.endswith("...")


# ---------------------------------------------------------------- timedelta
@pytest.mark.parametrize("text, seconds", [
    ("0:01:23.456000", 83.456), ("0:00:00", 0.0), ("1 day, 2:03:04", 93784.0), ("3 days, 0:00:00.5", 259200.5),
    ("23:59:59", 86399.0), ("-1 day, 23:59:59", -1.0)])
def test_timedelta_text_is_read_as_seconds(text, seconds):
    assert parse_timedelta(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1:2", "0:60:00", "0:00:61", "1 week, 0:00:00", "0:00:00.1234567", "abc",
                                  None, 12, "9" * 100 + ":00:00"])
def test_what_is_not_a_timedelta_is_none(text):
    assert parse_timedelta(text) is None


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=99999)))
def test_every_str_timedelta_reads_back(td):
    assert parse_timedelta(str(td)) == pytest.approx(td.total_seconds())


def test_a_negative_or_unreadable_eta_is_none_and_numbers_are_seconds():
    assert progress(parse(status_line("RUNNING", eta=timedelta(seconds=-5)))).eta is None
    assert progress(parse(json.dumps({"status": "RUNNING", "eta": 90, "time_per_epoch": 1.5}))).eta == 90.0
    assert format_seconds(93784.4) == "26:03:04" and format_seconds(-3) == "0:00:00"


# ---------------------------------------------------------------- robustness
def test_a_torn_last_line_garbage_and_non_objects_are_skipped_and_counted():
    torn = epoch_line(3, train_loss=0.3)[:40]
    text = text_of(epoch_line(1, train_loss=0.9), "Traceback (most recent call last):", "[1, 2]", '"text"', "null",
                   "", "   ", epoch_line(2, train_loss=0.5)) + torn
    log = parse(text)
    assert (log.lines, log.skipped, len(log.events)) == (7, 5, 2)
    assert progress(log).epoch == 2


def test_a_huge_line_is_skipped_without_being_parsed(monkeypatch):
    huge = json.dumps({"status": "RUNNING", "epoch": 9, "message": "x" * statusfile.MAX_LINE})
    seen = []
    real = statusfile.json_value
    monkeypatch.setattr(statusfile, "json_value", lambda text, what: seen.append(len(text)) or real(text, what))
    log = parse(text_of(epoch_line(1), huge))
    assert log.skipped == 1 and progress(log).epoch == 1
    assert max(seen) < statusfile.MAX_LINE


def test_deep_nesting_and_huge_numbers_are_skipped_lines():
    log = parse(text_of("{" + '"a":[' * 100000 + "]" * 100000 + "}", '{"epoch": ' + "9" * 5000 + "}",
                        epoch_line(4)))
    assert log.skipped == 2 and progress(log).epoch == 4


def test_bytes_are_decoded_and_crlf_lines_read():
    raw = (epoch_line(2, train_loss=0.5) + "\r\n\xff\xfe\r\n").encode("latin-1")
    log = parse(raw)
    assert progress(log).epoch == 2 and log.skipped == 1


def test_kpi_names_are_capped_per_file():
    kpis = {f"k{i}": i for i in range(statusfile.MAX_KPIS + 10)}
    log = parse(status_line("RUNNING", epoch=1, kpi=kpis) + "\n" + status_line("RUNNING", epoch=2, kpi={"late": 1}))
    assert len(progress(log).kpis) == statusfile.MAX_KPIS
    assert "late" not in progress(log).kpis


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=12)
_FIELDS = ["date", "time", "status", "message", "epoch", "max_epoch", "step", "max_step", "eta", "time_per_epoch"]
_LINE = st.one_of(
    st.text(max_size=80),
    st.fixed_dictionaries({}, optional={**{k: _JSON for k in _FIELDS},
                                        "status": st.sampled_from(["STARTED", "RUNNING", "SUCCESS", "FAILURE", "x"]),
                                        "epoch": st.integers(-2, 20), "step": st.integers(-2, 200),
                                        "kpi": st.dictionaries(st.text(max_size=6), _JSON, max_size=4)}).map(json.dumps))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "replace")), st.lists(_LINE).map("\n".join)))
def test_parse_never_raises_and_counts_every_nonblank_line(text):
    log = parse(text)
    nonblank = sum(1 for line in text.split("\n") if line.strip())
    assert log.lines == nonblank and len(log.events) + log.skipped == nonblank
    rows = series(log)
    p = progress(log)
    assert "\n" not in p.line()
    json.dumps(p.to_dict(), allow_nan=False)
    json.dumps(to_json(rows), allow_nan=False)
    table(rows), to_csv(rows)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_parse_of_raw_bytes_never_raises(data):
    log = parse(data)
    assert len(log.events) + log.skipped == log.lines


# ---------------------------------------------------------------- runs and series
def test_a_restart_reports_the_latest_run_and_keeps_earlier_epochs_below_it():
    first = [status_line("STARTED"), epoch_line(1, loss=0.9), epoch_line(2, loss=0.8), epoch_line(3, loss=0.7),
             epoch_line(4, loss=0.65)]
    resumed = [status_line("STARTED", message="Resuming"), epoch_line(3, loss=0.69)]
    log = parse(text_of(*first, *resumed))
    assert len(log.runs) == 2
    p = progress(log)
    assert (p.epoch, p.kpis) == (3, {"loss": 0.69})
    assert series(log) == [{"epoch": 1, "loss": 0.9}, {"epoch": 2, "loss": 0.8}, {"epoch": 3, "loss": 0.69}]


def test_a_restart_with_no_progress_yet_shows_only_its_status():
    log = parse(text_of(epoch_line(5, loss=0.5), status_line("STARTED", message="Starting Training")))
    p = progress(log)
    assert (p.status, p.epoch, p.kpis) == ("STARTED", None, {})
    assert p.line() == "STARTED"
    assert series(log) == [{"epoch": 5, "loss": 0.5}]


def test_started_lines_before_any_progress_are_one_run():
    log = parse(text_of(status_line("STARTED", message="a"), status_line("STARTED", message="b"), epoch_line(1)))
    assert len(log.runs) == 1


def _tao_epoch(epoch: int, last: int, val: dict | None, train: dict, carried: dict | None = None) -> list[str]:
    """One epoch as TAO writes it: the validation KPIs (no epoch), the epoch line repeating the KPI dict in
    effect, then the training loss (no epoch)."""
    lines = [status_line("RUNNING", message="Eval metrics generated.", kpi=val)] if val else []
    lines.append(status_line("RUNNING", epoch=epoch, max_epoch=last, step=100 * (epoch + 1),
                             message="Training loop in progress", kpi=val or carried))
    lines.append(status_line("RUNNING", message="Train metrics generated.", kpi=train))
    return lines


def test_taos_real_order_puts_each_kpi_on_its_epoch():
    """val_loss 0.9 / 0.5 / 0.7 on epochs 0 / 1 / 2: epoch 1 is best, and each training loss stays on its epoch."""
    lines = [status_line("STARTED", message="Starting DINO train."), status_line("STARTED")]
    train: dict | None = None
    for e, v in enumerate((0.9, 0.5, 0.7)):
        lines += _tao_epoch(e, 2, {"val_mAP": str(1 - v), "val_loss": v}, {"train_loss": 10.0 - e}, train)
        train = {"train_loss": 10.0 - e}
    lines += [status_line("RUNNING", message="Training loop complete.", kpi=train),
              status_line("RUNNING", message="Train finished successfully.", kpi=train)]
    rows = series(parse(text_of(*lines)))
    assert rows == [{"epoch": 0, "val_mAP": pytest.approx(0.1), "val_loss": 0.9, "train_loss": 10.0},
                    {"epoch": 1, "val_mAP": 0.5, "val_loss": 0.5, "train_loss": 9.0},
                    {"epoch": 2, "val_mAP": pytest.approx(0.3), "val_loss": 0.7, "train_loss": 8.0}]
    assert best(rows, "val_loss")["epoch"] == 1 and best(rows, "val_mAP", "max")["epoch"] == 1


def test_an_epoch_without_validation_gets_no_stale_value():
    """validation_interval 2: the epoch line of an epoch without validation repeats the previous training
    loss; it is no measurement of that epoch."""
    lines: list[str] = []
    train: dict | None = None
    for e in range(4):
        val = {"val_loss": 1.0 / (e + 1)} if e % 2 == 1 else None
        lines += _tao_epoch(e, 3, val, {"train_loss": 10.0 - e}, train)
        train = {"train_loss": 10.0 - e}
    assert series(parse(text_of(*lines))) == [
        {"epoch": 0, "train_loss": 10.0, "val_loss": None}, {"epoch": 1, "train_loss": 9.0, "val_loss": 0.5},
        {"epoch": 2, "train_loss": 8.0, "val_loss": None}, {"epoch": 3, "train_loss": 7.0, "val_loss": 0.25}]


def test_only_validation_or_only_training_kpis_stay_on_their_epoch():
    vals = [line for e in range(3) for line in (status_line("RUNNING", kpi={"val_loss": 0.9 - e / 10}),
                                                status_line("RUNNING", epoch=e, kpi={"val_loss": 0.9 - e / 10}))]
    assert [r["val_loss"] for r in series(parse(text_of(*vals)))] == [0.9, 0.8, 0.7]
    trains = [line for e in range(3) for line in (status_line("RUNNING", epoch=e, kpi={"loss": 0.1 * e} if e else None),
                                                  status_line("RUNNING", kpi={"loss": 0.1 * (e + 1)}))]
    assert [r["loss"] for r in series(parse(text_of(*trains)))] == [0.1, 0.2, pytest.approx(0.3)]


def test_an_epoch_lines_own_new_values_are_its_own():
    text = text_of(epoch_line(1, train_loss=0.9), status_line("RUNNING", epoch=1, kpi={"train_loss": 0.85}),
                   epoch_line(2, train_loss=0.7), epoch_line(3, val_loss=0.6))
    assert series(parse(text)) == [{"epoch": 1, "train_loss": 0.85, "val_loss": None},
                                   {"epoch": 2, "train_loss": 0.7, "val_loss": None},
                                   {"epoch": 3, "train_loss": None, "val_loss": 0.6}]


def test_a_series_without_epochs_is_by_step_and_a_kpi_named_like_the_key_is_left_out():
    text = text_of(status_line("RUNNING", step=10, kpi={"loss": 3.0, "step": 10}),
                   status_line("RUNNING", step=20, kpi={"loss": 2.0, "step": 20}))
    assert series(parse(text)) == [{"step": 10, "loss": 3.0}, {"step": 20, "loss": 2.0}]
    assert series(parse(status_line("STARTED"))) == []


# ---------------------------------------------------------------- renderings
ROWS = [{"epoch": 1, "train_loss": 0.9, "mAP": None}, {"epoch": 2, "train_loss": 0.412, "mAP": 0.31},
        {"epoch": 10, "train_loss": float("nan"), "mAP": 0.305}]


def test_the_table_is_aligned_with_a_dash_for_no_value():
    assert table(ROWS).splitlines() == [
        "epoch  train_loss    mAP",
        "    1         0.9      -",
        "    2       0.412   0.31",
        "   10         nan  0.305"]
    assert table([]) == "no KPI values in the status file yet"


def test_csv_and_json_carry_the_same_rows():
    parsed = list(csv.reader(io.StringIO(to_csv(ROWS))))
    assert parsed == [["epoch", "train_loss", "mAP"], ["1", "0.9", ""], ["2", "0.412", "0.31"],
                      ["10", "nan", "0.305"]]
    assert json.loads(json.dumps(to_json(ROWS), allow_nan=False)) == [
        {"epoch": 1, "train_loss": 0.9, "mAP": None}, {"epoch": 2, "train_loss": 0.412, "mAP": 0.31},
        {"epoch": 10, "train_loss": "nan", "mAP": 0.305}]
    assert to_csv([]) == ""


def test_a_kpi_name_never_becomes_a_spreadsheet_formula():
    assert to_csv([{"epoch": 1, "=HYPERLINK(1)": 2.0}]).splitlines()[0] == "epoch,'=HYPERLINK(1)"


def test_best_finds_the_row_of_the_lowest_or_highest_value():
    assert best(ROWS, "train_loss") == ROWS[1]
    assert best(ROWS, "mAP", "max") == ROWS[1]
    assert best(ROWS, "mAP", "min")["epoch"] == 10
    assert best([{"epoch": 1, "a": 1.0}, {"epoch": 2, "a": 1.0}], "a")["epoch"] == 1  # a tie: the earliest


def test_best_names_the_kpis_that_exist():
    with pytest.raises(TaoError, match=r"no KPI 'val_loss' in the status file: it has train_loss, mAP$"):
        best(ROWS, "val_loss")
    with pytest.raises(TaoError, match="holds no KPI values yet"):
        best([], "val_loss")
    with pytest.raises(TaoError, match="no finite value"):
        best([{"epoch": 1, "a": float("nan")}, {"epoch": 2, "a": None}], "a")
    with pytest.raises(UsageError, match="use min or max"):
        best(ROWS, "mAP", "lowest")
    assert kpi_names(ROWS) == ["train_loss", "mAP"]


# ---------------------------------------------------------------- plots
def test_the_terminal_plot_draws_each_kpi_in_plain_characters():
    text = plot_terminal(ROWS, ["train_loss", "mAP"], width=60, height=15)
    assert "train_loss" in text and "mAP" in text and "epoch" in text
    assert "\x1b" not in text and len(text.splitlines()) == 15
    assert "\x1b" in plot_terminal(ROWS, color=True)


def test_a_plot_of_an_unknown_or_empty_kpi_says_so():
    with pytest.raises(TaoError, match="it has train_loss, mAP"):
        plot_terminal(ROWS, ["loss"])
    with pytest.raises(TaoError, match="nothing to plot yet"):
        plot_terminal([{"epoch": 1, "a": None}], ["a"])


def test_the_png_plot_is_a_private_png(tmp_path):
    rows = ROWS + [{"epoch": 11, "train_loss": 0.3, "mAP": 0.4, "$x_{": 1.0, "_hidden": 2.0}]
    rows = [{**{"$x_{": None, "_hidden": None}, **row} for row in rows]
    out = plot_png(rows, None, tmp_path / "kpis.png")
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert os.stat(out).st_mode & 0o777 == 0o600


def test_the_png_plot_into_a_missing_folder_is_one_line(tmp_path):
    with pytest.raises(TaoError, match=r"cannot write the plot to .*nowhere/kpis.png"):
        plot_png(ROWS, ["mAP"], tmp_path / "nowhere" / "kpis.png")


@pytest.mark.parametrize("module", ["plotext", "matplotlib"])
def test_a_missing_plot_library_is_one_line_naming_pip_install(monkeypatch, tmp_path, module):
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(TaoError) as exc:
        plot_terminal(ROWS) if module == "plotext" else plot_png(ROWS, None, tmp_path / "kpis.png")
    assert str(exc.value).endswith(f"needs the optional package {module}: pip install {module}")
    assert not (tmp_path / "kpis.png").exists()


def test_plotext_5_is_asked_to_upgrade(monkeypatch):
    monkeypatch.setitem(sys.modules, "plotext", types.SimpleNamespace(plot=lambda *a: None, build=lambda: ""))
    with pytest.raises(TaoError, match="plotext 6 or newer: pip install --upgrade plotext"):
        plot_terminal(ROWS)


_VALUES = st.lists(st.none() | st.floats() | st.integers(-10**15, 10**15), min_size=1, max_size=12)


def _rows_of(values: list) -> list[dict]:
    return [{"epoch": i, "a": v, "b": -v if isinstance(v, (int, float)) else None} for i, v in enumerate(values)]


@settings(max_examples=60, deadline=None)
@given(_VALUES)
def test_the_terminal_plot_of_any_values_is_text_or_one_line(values):
    try:
        assert isinstance(plot_terminal(_rows_of(values), width=40, height=10), str)
    except TaoError as exc:
        assert str(exc).startswith("nothing to plot yet")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_VALUES)
def test_the_png_plot_of_any_values_is_a_png_or_one_line(tmp_path, values):
    try:
        assert plot_png(_rows_of(values), ["a", "b"], tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    except TaoError as exc:
        assert str(exc).startswith("nothing to plot yet")


def test_no_nan_reaches_the_plots():
    lines = plot_lines(ROWS, None)
    assert lines == [("train_loss", [1, 2], [0.9, 0.412]), ("mAP", [2, 10], [0.31, 0.305])]
    assert all(math.isfinite(y) for _, _, ys in lines for y in ys)


def test_epochs_are_shown_from_one_in_the_status_line_and_the_sweep_table():
    from taobank.campaign import sweeps

    assert statusfile.epoch_text(9, 9) == "10/10" and statusfile.epoch_text(0, 0) == "1/1"
    assert statusfile.epoch_text(2, None) == "3"
    assert sweeps._epoch({"epoch": 0, "max_epoch": 0}) == "1/1"  # a one-epoch run is no "0/0"
    assert sweeps._epoch({"epoch": 9, "max_epoch": 9, "line": "x"}) == "10/10"


def test_only_taos_own_sentence_of_an_action_is_success():
    for message in ("Train finished successfully.", "Evaluate finished successfully.",
                    "Gen_trt_engine finished successfully.",
                    # nvidia-tao-core's monitor_status: f"{name} {mode} completed successfully"
                    "DINO train completed successfully", "TAO-Toolkit gen_trt_engine completed successfully"):
        assert parse(status_line("RUNNING", message=message)).events[0].outcome == "SUCCESS"
    for message in ("Dataset conversion finished successfully.", "train finished successfully", "Train finished",
                    "train completed successfully", "DINO train completed successfully.", "Training loop complete."):
        assert parse(status_line("RUNNING", message=message)).events[0].outcome is None

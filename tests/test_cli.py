"""The command line: schema, synthesize (atomic, never over its input), saturate, demo."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from bayesynth.cli import main, output_paths
from bayesynth.datasets import simulate_school_census
from tests.conftest import make_mixed


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "data.csv"
    make_mixed(n=120, seed=4, missing=True).to_csv(path, index=False)
    return path


def test_schema_command(csv, capsys):
    assert main(["schema", str(csv)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [c["type"] for c in d["columns"]] == [
        "categorical", "categorical", "binary", "count", "continuous"]


def test_schema_command_takes_types_and_special_codes(tmp_path, capsys):
    """The command line's way to what infer_schema's keywords say: a coded column declared
    categorical, a code too rare to infer declared a code."""
    r = np.random.default_rng(11)
    n = 200
    friends = r.integers(0, 30, n)
    friends[[5, 50]] = -8
    df = pd.DataFrame({"nofriend": friends, "tenure": r.choice([1, 2, 4, 5, 6], n),
                       "x": r.normal(size=n).round(3)})
    src = tmp_path / "t.csv"
    df.to_csv(src, index=False)
    assert main(["schema", str(src)]) == 0
    got = capsys.readouterr()
    cols = {c["name"]: c for c in json.loads(got.out)["columns"]}
    assert cols["tenure"]["type"] == "count" and cols["nofriend"]["type"] == "continuous"
    assert "'nofriend' has the negative values -8 (2 records)" in got.err
    assert main(["schema", str(src), "--categorical", "tenure",
                 "--special-codes", "nofriend=-8"]) == 0
    got = capsys.readouterr()
    cols = {c["name"]: c for c in json.loads(got.out)["columns"]}
    assert cols["tenure"]["type"] == "categorical" and cols["tenure"]["levels"] == [1, 2, 4, 5, 6]
    assert cols["nofriend"]["type"] == "count" and cols["nofriend"]["special_codes"] == [-8]
    assert "negative values" not in got.err
    assert main(["schema", str(src), "--special-codes", "nofriend="]) == 0  # no codes
    cols = {c["name"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert "special_codes" not in cols["nofriend"]
    # errors name the options the user typed, not infer_schema's keywords
    for bad, said in (("nofriend=minus8", "'minus8' is not a number"),
                      ("-8", "COLUMN=CODE"),
                      ("friends=-8", "--special-codes names column 'friends', which the table "
                                     "does not have"),
                      ("nofriend=nan", "--special-codes gives column 'nofriend' the code nan")):
        assert main(["schema", str(src), "--special-codes", bad]) == 2
        assert said in capsys.readouterr().err
    for typ in ("categorical", "continuous"):
        assert main(["schema", str(src), f"--{typ}", "tenure,Tenure"]) == 2
        assert f"error: --{typ} names column 'Tenure', which" in capsys.readouterr().err
    assert main(["schema", str(src), "--special-codes", "nofriend=-8",
                 "--special-codes", "nofriend=-9"]) == 2
    assert "names column 'nofriend' twice" in capsys.readouterr().err
    # a name with "=" in it, as the warning spells it
    df.rename(columns={"nofriend": "friends=n"}).to_csv(src, index=False)
    assert main(["schema", str(src)]) == 0
    err = capsys.readouterr().err
    assert "--special-codes friends=n=-8," in err
    assert main(["schema", str(src), "--special-codes", "friends=n=-8"]) == 0
    cols = {c["name"]: c for c in json.loads(capsys.readouterr().out)["columns"]}
    assert cols["friends=n"]["special_codes"] == [-8]
    assert main(["schema", str(src), "--ordinal", "tenure", "--count", "tenure"]) == 2
    assert "declared both" in capsys.readouterr().err


def test_an_inferred_schema_names_few_whole_values_read_as_counts():
    """CE's tenure and marital status are codes 1-6 and 1-5; an inferred schema reads them as
    counts, and the copula then models them as ordered. The command line said nothing."""
    from bayesynth.cli import _inferred_schema_warning
    from bayesynth.schema import infer_schema

    r = np.random.default_rng(12)
    n = 300
    df = pd.DataFrame({"Tenure": r.choice([1, 2, 4, 5, 6], n),
                       "Marital": r.choice([1, 2, 3, 4, 5], n),
                       "Age": r.integers(18, 90, n),  # many values: a count, said nothing of
                       "kids": np.where(r.random(n) < 0.3, -8, r.integers(0, 10, n)),
                       "spend": r.gamma(2, 100, n).round(2),
                       # few whole values, one negative: continuous, never a label
                       "gain": r.choice([-2000, 0, 1000, 3000], n)})
    schema = infer_schema(df, suggest=False)
    assert schema["gain"].type == "continuous"
    said = _inferred_schema_warning(df, schema, "ce data.csv")
    assert said.startswith("the schema inferred from ce data.csv reads Tenure (5 values), "
                           "Marital (5 values), kids (10 values) as counts")
    assert "Age" not in said and "gain" not in said and "near-deterministic" not in said
    assert ("bayesynth schema 'ce data.csv' --categorical Tenure,Marital,kids > schema.json, "
            "keeping in --categorical only the coded columns), and pass --schema") in said
    # 11 whole values (the code aside) are more than FEW_VALUES: not named; nor is a column
    # declared categorical
    df["kids"] = np.where(r.random(n) < 0.3, -8, r.integers(0, 11, n))
    df.loc[0, "kids"] = 10
    said = _inferred_schema_warning(df, infer_schema(df, categorical=["Tenure"], suggest=False),
                                    "ce.csv")
    assert "reads Marital (5 values) as counts" in said and "--categorical Marital >" in said
    assert _inferred_schema_warning(df[["Age", "spend"]],
                                    infer_schema(df[["Age", "spend"]], suggest=False),
                                    "ce.csv") is None


def test_synthesize_one_and_many(csv, tmp_path, capsys):
    out = tmp_path / "syn.csv"
    args = ["synthesize", str(csv), "-o", str(out), "--draws", "20", "--tune", "20",
            "--chains", "1", "--seed", "3", "--n-factors", "2", "--quiet"]
    assert main(args) == 0
    real = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    syn = pd.read_csv(out, keep_default_na=False, na_values=[""])
    assert list(syn.columns) == list(real.columns) and len(syn) == len(real)
    assert not list(tmp_path.glob(".*.tmp"))
    # the same seed gives the same file
    out2 = tmp_path / "again.csv"
    assert main(args[:3] + [str(out2)] + args[4:]) == 0
    assert out.read_text() == out2.read_text()
    many = tmp_path / "many.csv"
    assert main(["synthesize", str(csv), "-o", str(many), "--m", "3", "--draws", "20",
                 "--chains", "1", "--seed", "1", "--n-factors", "2", "--quiet"]) == 0
    assert [p.exists() for p in output_paths(many, 3)] == [True] * 3
    assert output_paths(many, 3)[0].name == "many_1.csv"


def test_synthesize_names_the_relations_an_inferred_schema_leaves_to_chance(tmp_path, capsys):
    """Without --schema the data's exact relations (age groups of an age, students who are
    young) are not enforced: synthesize says so, naming them and the fix. Following the fix
    with every suggestion keeps them exactly."""
    from tests.test_rules import _aged

    df = _aged(n=300, seed=2)
    r = np.random.default_rng(0)
    df["student"] = np.where(df.agegr == "16-24", "YES", r.choice(["YES", "NO"], 300,
                                                                  p=[0.2, 0.8]))
    src = tmp_path / "aged data.csv"
    df.to_csv(src, index=False)
    base = ["--draws", "20", "--tune", "20", "--chains", "1", "--seed", "3",
            "--n-factors", "2", "--quiet"]
    out = tmp_path / "o.csv"
    assert main(["synthesize", str(src), "-o", str(out), *base]) == 0
    err = capsys.readouterr().err
    assert "near-deterministic relations" in err and "--schema schema.json" in err
    assert 'agegr == "16-24" if age in 16..2' in err  # 16..25: no one 25 or 26 here
    assert f"bayesynth schema '{src}' > schema.json" in err  # quoted: a space in the path
    # the fix, as the message gives it, with every suggestion
    assert main(["schema", str(src)]) == 0
    d = json.loads(capsys.readouterr().out)
    d["rules"] = d.pop("suggested_rules")
    assert {r["column"] for r in d["rules"]} == {"agegr", "student"}
    (tmp_path / "schema.json").write_text(json.dumps(d))
    kept = tmp_path / "kept.csv"
    assert main(["synthesize", str(src), "-o", str(kept), "--schema",
                 str(tmp_path / "schema.json"), *base]) == 0
    assert "near-deterministic" not in capsys.readouterr().err
    syn = pd.read_csv(kept)
    group_of = {age: r["value"] for r in d["rules"] if r["column"] == "agegr"
                for age in r["when"]["age"]}
    assert sorted(group_of) == list(range(16, 91))
    assert (syn.agegr == syn.age.map(group_of)).all()
    assert (syn.student[syn.agegr == "16-24"] == "YES").all()


def test_synthesize_says_which_columns_it_reads_as_counts(tmp_path, capsys, monkeypatch):
    """The warning of synthesize without --schema, up to the fit (stopped there: the fit is
    tested elsewhere)."""
    import bayesynth.synthesis as synthesis
    from bayesynth.errors import BayesynthError

    class Stop(synthesis.CopulaSynthesizer):
        def fit(self, df):
            raise BayesynthError("stopped before the fit")

    monkeypatch.setattr(synthesis, "CopulaSynthesizer", Stop)
    r = np.random.default_rng(13)
    src = tmp_path / "ce.csv"
    pd.DataFrame({"Tenure": r.choice([1, 2, 4, 5, 6], 200),
                  "Income": r.gamma(2, 1e4, 200).round()}).to_csv(src, index=False)
    assert main(["synthesize", str(src), "-o", str(tmp_path / "o.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "reads Tenure (5 values) as counts" in err and "stopped before the fit" in err
    assert f"bayesynth schema {src} --categorical Tenure > schema.json" in err


def test_synthesize_refuses_to_overwrite(csv, tmp_path, capsys):
    before = csv.read_bytes()
    assert main(["synthesize", str(csv), "-o", str(csv), "--quiet"]) == 2
    assert "never overwrites its input" in capsys.readouterr().err
    assert csv.read_bytes() == before
    existing = tmp_path / "exists.csv"
    existing.write_text("keep me")
    assert main(["synthesize", str(csv), "-o", str(existing), "--quiet"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert existing.read_text() == "keep me"


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"id": [f"x{i}" for i in range(30)], "v": range(30)}).to_csv(bad, index=False)
    assert main(["synthesize", str(bad), "-o", str(tmp_path / "o.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'id'" in err and "identifier" in err
    assert main(["schema", str(tmp_path / "missing.csv")]) == 2


def test_demo_small(tmp_path, capsys):
    assert main(["demo", "--n", "150", "--draws", "20", "--tune", "20", "--chains", "1",
                 "--m", "2", "--output", str(tmp_path / "demo"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "marginal fidelity" in out and "cross-tab" in out
    assert "convergence not judged: it needs at least two chains" in out  # one chain
    # the share of copied continuous values comes with what chance gives
    shares = re.search(r"equal to a real value: ([0-9.]+)%\n  \(values of an independent "
                       r"sample of the same population: ([0-9.]+)%", out)
    assert shares and all(0 <= float(v) <= 100 for v in shares.groups())
    assert (tmp_path / "demo" / "synthetic_2.csv").exists()
    assert (tmp_path / "demo" / "model" / "posterior.nc").exists()
    # each column at its precision (two decimals here), whole values without ".0"
    for name in ("real.csv", "synthetic_1.csv"):
        rows = (tmp_path / "demo" / name).read_text().splitlines()
        header = rows[0].split(",")
        temps = [r.split(",")[header.index("temp_t2")] for r in rows[1:]]
        assert not any(v.endswith(".0") for v in temps)
        assert all(len(v.split(".")[1]) <= 2 for v in temps if "." in v)


def test_synthesize_with_bart_targets(csv, tmp_path):
    out = tmp_path / "t.csv"
    assert main(["synthesize", str(csv), "-o", str(out), "--draws", "20", "--chains", "1",
                 "--seed", "2", "--n-factors", "2", "--targets", "visits", "--bart-trees", "10",
                 "--quiet"]) == 0
    syn = pd.read_csv(out)
    assert syn["visits"].notna().all() and (syn["visits"] >= 0).all()


def test_csv_habits_delimiter_dates_precision(tmp_path):
    import numpy as np

    r = np.random.default_rng(0)
    n = 150
    df = pd.DataFrame({"money": np.round(r.gamma(3, 1000, n), 2),
                       "when": pd.date_range("2020-01-01", periods=n, freq="D")
                       .strftime("%d/%m/%Y"),
                       "grp": r.choice(["a", "b", "c"], n),
                       "k": r.poisson(3, n).astype(float)})
    df.loc[:4, "k"] = np.nan  # integers with missing values: a float column in pandas
    src = tmp_path / "semi.csv"
    df.to_csv(src, sep=";", index=False)
    out = tmp_path / "out.csv"
    assert main(["synthesize", str(src), "-o", str(out), "--draws", "20", "--chains", "1",
                 "--seed", "1", "--quiet"]) == 0
    text = out.read_text().splitlines()
    assert text[0] == "money;when;grp;k"  # the input's delimiter
    syn = pd.read_csv(out, sep=";", keep_default_na=False, na_values=[""])
    # money keeps its two decimals; the dates come back as dates in the input's layout
    assert all(len(v.split(".")[1]) <= 2 for v in syn["money"].astype(str) if "." in v)
    parsed = pd.to_datetime(syn["when"], format="%d/%m/%Y")
    assert parsed.min() >= pd.Timestamp("2020-01-01")
    assert parsed.max() <= pd.Timestamp("2020-01-01") + pd.Timedelta(days=n - 1)
    # whole numbers are written without a decimal point
    assert not any(line.split(";")[3].endswith(".0") for line in text[1:])


def test_duplicate_column_names_are_refused(tmp_path, capsys):
    src = tmp_path / "dup.csv"
    src.write_text("a,a,b\n" + "\n".join(f"{i},{i % 3},{i % 2}" for i in range(30)) + "\n")
    assert main(["synthesize", str(src), "-o", str(tmp_path / "o.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "duplicate column names ['a']" in err
    assert not (tmp_path / "o.csv").exists()


def test_single_column_file_says_so(tmp_path, capsys):
    src = tmp_path / "one.csv"
    src.write_text("x\n" + "\n".join(str(i % 7) for i in range(40)) + "\n")
    assert main(["schema", str(src)]) == 0
    assert "single column" in capsys.readouterr().err


def test_sigterm_ends_the_workers_and_writes_nothing(tmp_path):
    """A scheduler's SIGTERM during sampling: all worker processes end, no output file."""
    import signal
    import subprocess
    import sys
    import time

    psutil = pytest.importorskip("psutil")
    import bayesynth as bs

    src = tmp_path / "in.csv"
    bs.datasets.simulate_child_health(n=200, random_seed=1).to_csv(src, index=False)
    out = tmp_path / "out.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bayesynth.cli", "synthesize", str(src), "-o", str(out),
         "--draws", "1000000", "--chains", "2", "--cores", "2", "--seed", "1", "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    parent = psutil.Process(proc.pid)

    def cmdline(k) -> str:  # a short-lived child (a compiler run) may end while we look
        try:
            return " ".join(k.cmdline())
        except psutil.Error:
            return ""  # gone or a zombie: not a chain worker

    kids: list = []
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None:
            kids = parent.children(recursive=True)
            # the chain workers exist once two Python processes besides the fork server
            # run (not the compiler runs of PyTensor's C code, which come before sampling)
            if len([k for k in kids if (c := cmdline(k)) and "forkserver" not in c
                    and "python" in c]) >= 2:
                break
            time.sleep(0.5)
        assert proc.poll() is None and len(kids) >= 2, "the chains never started"
        time.sleep(3)  # well into sampling
        kids = parent.children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM
        assert "stopped by SIGTERM" in err and "no output file" in err
        _, alive = psutil.wait_procs(kids, timeout=20)
        assert alive == [], f"worker processes still alive: {alive}"
        assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    finally:  # a failed check must not leave a million-draw run behind
        for q in [*kids, parent]:
            try:
                q.kill()
            except psutil.Error:
                pass


def test_cli_saturate_writes_tables_and_microdata(tmp_path, capsys):
    cells = simulate_school_census(50_000, n_areas=3, random_seed=1)
    src = tmp_path / "cells.csv"
    cells.to_csv(src, index=False)
    out = tmp_path / "syn.csv"
    assert main(["saturate", str(src), "-o", str(out), "--count", "count", "--family", "pig",
                 "--sigma", "1", "--alpha", "0.01", "--seed", "3"]) == 0
    syn = pd.read_csv(out)
    assert list(syn.columns) == list(cells.columns) and (syn["count"] > 0).all()
    assert "expected tau_4(1)" in capsys.readouterr().out
    again = tmp_path / "again.csv"
    main(["saturate", str(src), "-o", str(again), "--count", "count", "--family", "pig",
          "--sigma", "1", "--alpha", "0.01", "--seed", "3", "--quiet"])
    pd.testing.assert_frame_equal(syn, pd.read_csv(again))
    micro = tmp_path / "micro.csv"
    assert main(["saturate", str(src), "-o", str(micro), "--count", "count", "--max-risk",
                 "0.5", "--microdata", "--m", "2", "--seed", "1", "--quiet"]) == 0
    for i in (1, 2):
        rec = pd.read_csv(tmp_path / f"micro_{i}.csv")
        assert list(rec.columns) == ["local_authority", "age", "sex", "ethnicity", "language"]
        assert abs(len(rec) - 50_000) < 5 * np.sqrt(50_000) + 0.02 * 50_000
    # nothing is overwritten, and an impossible requirement is a clear error
    assert main(["saturate", str(src), "-o", str(out), "--count", "count"]) == 2
    assert main(["saturate", str(src), "-o", str(tmp_path / "x.csv"), "--count", "count",
                 "--max-risk", "0.0001"]) == 2
    err = capsys.readouterr().err
    # the fix it names is one a command-line user can apply (not tune_saturated's arguments)
    assert "tau_4(1) <= 0.0001" in err and "Give --max-risk 0." in err and "or more" in err
    assert "sigmas=" not in err
    # the Poisson has no dispersion: none is printed, and one given is refused
    pois = tmp_path / "pois.csv"
    assert main(["saturate", str(src), "-o", str(pois), "--count", "count", "--family",
                 "poisson", "--seed", "1"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("setting:")][0]
    assert line.startswith("setting: poisson, alpha = 0;") and "sigma" not in line
    assert main(["saturate", str(src), "-o", str(tmp_path / "p2.csv"), "--count", "count",
                 "--family", "poisson", "--sigma", "0.5"]) == 2
    assert "no effect on the Poisson" in capsys.readouterr().err


def test_cli_saturate_prints_what_it_runs_and_keeps_decimal_commas(tmp_path, capsys):
    """The setting is printed unrounded, tau_4(1) is said to be a ratio of expectations, a
    table without ones says so, and numeric levels written with decimal commas come back
    with them."""
    src = tmp_path / "eu.csv"
    pd.DataFrame({"dose": ["1,5", "2,25", "1,5", "2,25", "3"] * 4,
                  "g": ["a", "a", "b", "b", "b"] * 4}).to_csv(src, sep=";", index=False)
    out = tmp_path / "syn.csv"
    assert main(["saturate", str(src), "-o", str(out), "--family", "nbi", "--sigma",
                 "0.12345678", "--alpha", "1.23456789e-05", "--seed", "1"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("setting:")][0]
    assert "sigma = 0.12345678," in line and "alpha = 1.23456789e-05;" in line
    assert "a ratio of expected counts" in line
    assert "no cell of this table has count 1" in line  # every cell holds 4 records
    text = out.read_text().splitlines()
    assert text[0] == "dose;g;count"
    doses = {row.split(";")[0] for row in text[1:]}
    assert doses <= {"1,5", "2,25", "3"} and "1,5" in doses


def test_save_model_never_replaces_a_folder_or_file_unasked(csv, tmp_path, capsys):
    """--save-model replaces its whole folder, so it is checked before fitting: the folder
    holding the input, an existing folder (without --overwrite) and a file are refused, and
    nothing is written (before, the input's folder was deleted)."""
    project = tmp_path / "proj"
    project.mkdir()
    data = project / "data.csv"
    data.write_bytes(csv.read_bytes())
    (project / "notes.txt").write_text("important")
    base = ["synthesize", str(data), "--draws", "20", "--chains", "1", "--quiet"]
    out = tmp_path / "o.csv"
    assert main(base + ["-o", str(out), "--save-model", str(project), "--overwrite"]) == 2
    assert "a file of this run" in capsys.readouterr().err
    other = tmp_path / "old_model"
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    assert main(base + ["-o", str(out), "--save-model", str(other)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    a_file = tmp_path / "existing.txt"
    a_file.write_text("x")
    assert main(base + ["-o", str(out), "--save-model", str(a_file), "--overwrite"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert sorted(p.name for p in project.iterdir()) == ["data.csv", "notes.txt"]
    assert (other / "keep.txt").read_text() == "keep" and a_file.read_text() == "x"
    assert not out.exists()


def test_schema_of_a_table_with_one_date_per_wave(tmp_path, capsys):
    """One interview date per survey wave is a near-deterministic pattern; the suggested
    rules must not hold dates (the schema JSON crashed on a Timestamp)."""
    rng = np.random.default_rng(0)
    wave = rng.choice(["w1", "w2", "w3"], 90)
    dates = pd.Series(wave).map({"w1": "2020-03-01", "w2": "2021-03-01", "w3": "2022-03-01"})
    path = tmp_path / "waves.csv"
    pd.DataFrame({"wave": wave, "interview": dates, "x": rng.normal(size=90)}).to_csv(
        path, index=False)
    assert main(["schema", str(path)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {c["name"]: c["type"] for c in d["columns"]}["interview"] != "identifier"


def test_dates_that_read_both_day_first_and_month_first_are_refused(tmp_path, capsys):
    """US dates whose days are all <= 12 were read day-first without a word, and the
    synthetic dates written back were impossible in the file's own layout."""
    days = pd.date_range("2019-01-01", "2022-12-01", freq="MS")  # every day is 1
    path = tmp_path / "us.csv"
    pd.DataFrame({"when": days.strftime("%m/%d/%Y"), "x": np.arange(len(days))}).to_csv(
        path, index=False)
    out = tmp_path / "o.csv"
    assert main(["synthesize", str(path), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'when'" in err and "YYYY-MM-DD" in err and not out.exists()
    # one day above 12 settles it
    ok = tmp_path / "ok.csv"
    pd.DataFrame({"when": ["01/13/2020", "02/01/2020"], "x": [1, 2]}).to_csv(ok, index=False)
    from bayesynth.cli import read_table

    assert read_table(ok).attrs["date_formats"] == {"when": "%m/%d/%Y"}


def test_codes_keep_their_spelling_in_the_output(tmp_path, capsys):
    """Whole-number level codes with missing values come back without ".0", zero-padded codes
    keep their zeros (they are labels), and saturate writes dates in the input's layout."""
    rng = np.random.default_rng(1)
    n = 120
    sex = rng.choice(["1", "2", ""], n, p=[0.45, 0.45, 0.1])
    region = rng.choice(["01", "02", "07"], n)
    src = tmp_path / "codes.csv"
    pd.DataFrame({"sex": sex, "region": region, "x": np.round(rng.normal(50, 10, n), 1)}
                 ).to_csv(src, index=False)
    out = tmp_path / "o.csv"
    assert main(["synthesize", str(src), "-o", str(out), "--draws", "20", "--chains", "1",
                 "--seed", "1", "--quiet"]) == 0
    syn = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert set(syn["sex"]) <= {"1", "2", ""}
    assert set(syn["region"]) <= {"01", "02", "07"}
    # saturate: dates are written back as the input wrote them
    months = rng.choice(["01/01/2020", "15/03/2020", "20/06/2021"], 400)
    cells = tmp_path / "months.csv"
    pd.DataFrame({"month": months, "g": rng.choice(["a", "b"], 400)}).to_csv(cells,
                                                                            index=False)
    for extra in ([], ["--microdata"]):
        sat = tmp_path / f"sat{len(extra)}.csv"
        assert main(["saturate", str(cells), "-o", str(sat), "--seed", "2", "--quiet",
                     *extra]) == 0
        got = pd.read_csv(sat, dtype=str)["month"]
        assert set(got) <= {"01/01/2020", "15/03/2020", "20/06/2021"}, set(got)


def test_an_unreadable_file_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("name,x\nJos\xe9,1\nAna,2\n".encode("latin-1"))
    assert main(["schema", str(bad)]) == 2
    assert "cannot be read as a UTF-8 CSV" in capsys.readouterr().err


def test_semicolon_file_with_decimal_commas(tmp_path):
    """A European CSV: ';' between fields, ',' in decimals. The numbers are numbers (they
    were labels of a categorical) and come back with decimal commas."""
    from bayesynth.cli import read_table

    rng = np.random.default_rng(0)
    w = np.round(rng.normal(70, 10, 80), 1)
    src = tmp_path / "eu.csv"
    pd.DataFrame({"weight": w, "g": rng.choice(["a", "b"], 80)}).to_csv(
        src, sep=";", decimal=",", index=False)
    df = read_table(src)
    assert pd.api.types.is_float_dtype(df["weight"]) and np.allclose(df["weight"], w)
    out = tmp_path / "o.csv"
    assert main(["synthesize", str(src), "-o", str(out), "--draws", "20", "--chains", "1",
                 "--seed", "1", "--quiet"]) == 0
    back = pd.read_csv(out, sep=";", decimal=",")
    assert pd.api.types.is_float_dtype(back["weight"])
    assert back["weight"].between(w.min(), w.max()).all()


def test_numbers_written_in_their_shortest_forms_come_back_so(tmp_path):
    """CE writes amounts in their shortest forms with up to four decimals (12.5, 3, 0.1234):
    the output must not pad them to four (12.5000), which no real value has. A column all
    written with two decimals (3260.10) is padded, as in the test below."""
    from bayesynth.cli import read_table

    rng = np.random.default_rng(2)
    amount = [round(float(x), int(d)) for x, d in
              zip(rng.gamma(2.0, 50.0, 150), rng.integers(0, 5, 150))]
    src = tmp_path / "ce.csv"
    pd.DataFrame({"amount": amount, "g": rng.choice(["a", "b"], 150)}).to_csv(src, index=False)
    assert read_table(src).attrs["fixed_decimals"] == {}
    out = tmp_path / "syn.csv"
    assert main(["synthesize", str(src), "-o", str(out), "--draws", "20", "--tune", "20",
                 "--chains", "1", "--max-extensions", "0", "--seed", "1", "--quiet"]) == 0
    values = [line.split(",")[0] for line in out.read_text().splitlines()[1:]]
    frac = [v.split(".")[1] for v in values if "." in v]
    assert frac and all(len(f) <= 4 and not f.endswith("0") for f in frac)
    assert any(len(f) < 4 for f in frac)


def test_cli_keeps_written_decimals_and_refuses_bad_outputs_before_work(tmp_path, capsys):
    """Money written with 2 decimals came back as -9834.5; an output path that is a folder
    failed only after the fit; a header-only saturate input wrote an empty file; --bart-trees
    0 and evaluate's user errors ended in tracebacks."""
    rng = np.random.default_rng(0)
    src = tmp_path / "money.csv"
    pd.DataFrame({"age": rng.integers(18, 80, 120),
                  "price": np.round(rng.gamma(4.0, 5000.0, 120), 2)}).to_csv(
        src, index=False, float_format="%.2f")
    out = tmp_path / "syn.csv"
    assert main(["synthesize", str(src), "-o", str(out), "--draws", "20", "--tune", "20",
                 "--chains", "1", "--max-extensions", "0", "--seed", "1", "--quiet"]) == 0
    prices = [line.split(",")[1] for line in out.read_text().splitlines()[1:]]
    assert all(p.split(".")[1].__len__() == 2 for p in prices)
    folder = tmp_path / "folder"
    folder.mkdir()
    assert main(["synthesize", str(src), "-o", str(folder), "--overwrite"]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["synthesize", str(src), "-o", str(tmp_path / "b.csv"), "--targets", "price",
                 "--bart-trees", "0"]) == 2
    assert "bart_m" in capsys.readouterr().err
    header = tmp_path / "header.csv"
    header.write_text("a,b\n")
    assert main(["saturate", str(header), "-o", str(tmp_path / "h.csv")]) == 2
    assert not (tmp_path / "h.csv").exists()
    assert main(["evaluate", str(src), str(out), "-o", str(tmp_path / "r.html"), "--known",
                 "age", "--sensitive", "age"]) == 2
    assert "also a key" in capsys.readouterr().err


def test_warnings_are_printed_for_command_line_users(csv, tmp_path, capsys):
    """A warning (here: chains too short to converge) reads as the command's own message, not
    as a Python source location and line of bayesynth's code."""
    import warnings

    out = tmp_path / "syn.csv"
    before = warnings.showwarning
    assert main(["synthesize", str(csv), "-o", str(out), "--draws", "8", "--tune", "8",
                 "--chains", "2", "--cores", "1", "--max-extensions", "0", "--seed", "1",
                 "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "bayesynth: warning: Largest R-hat" in err
    assert "cli.py:" not in err and "RuntimeWarning" not in err
    assert warnings.showwarning is before  # restored for the caller

"""The command line: schema, synthesize (atomic, never over its input), demo."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bayesynth.cli import main, output_paths
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
    assert (tmp_path / "demo" / "synthetic_2.csv").exists()
    assert (tmp_path / "demo" / "model" / "posterior.nc").exists()


def test_synthesize_with_bart_targets(csv, tmp_path):
    out = tmp_path / "t.csv"
    assert main(["synthesize", str(csv), "-o", str(out), "--draws", "20", "--chains", "1",
                 "--seed", "2", "--n-factors", "2", "--targets", "visits", "--bart-trees", "10",
                 "--quiet"]) == 0
    syn = pd.read_csv(out)
    assert syn["visits"].notna().all() and (syn["visits"] >= 0).all()

"""The HTML/JSON report and the `bayesynth evaluate` command."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

import bayesynth as bs
from bayesynth.cli import main


def _tables(rng, n=300):
    real = pd.DataFrame({"k": rng.choice(list("ab"), n), "g": rng.choice(list("uvw"), n),
                         "x": rng.gamma(4.0, 2.0, n), "y": rng.normal(10, 2, n)})
    syns = [real.assign(x=real["x"] * np.exp(rng.normal(0, 0.05, n)),
                        y=real["y"] + rng.normal(0, 0.5, n)) for _ in range(3)]
    return real, syns


def test_report_writes_html_and_json(rng, tmp_path):
    real, syns = _tables(rng)
    out = tmp_path / "r" / "report.html"
    res = bs.evaluation.report(real, syns, out, known=["k"], synthesised=["x", "g"],
                               sensitive="y", public="x", regression="y ~ x + g + k")
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") >= 5
    for title in ("Marginal distributions", "Cross-tabulations", "Propensity-score utility",
                  "Regression inference", "Identification risk",
                  "Attribute disclosure at outliers", "Risk and utility"):
        assert title in page
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved == res
    assert len(saved["propensity"]) == 3
    assert saved["identification_risk"]["best_radius"] in (0.01, 0.025, 0.05, 0.1, 0.2, 0.3)
    assert {"column", "max_ecdf", "tv"} <= set(saved["marginals"][0])


def test_evaluate_command(rng, tmp_path, capsys):
    real, syns = _tables(rng, 200)
    real.to_csv(tmp_path / "real.csv", index=False)
    paths = []
    for i, s in enumerate(syns[:2]):
        p = tmp_path / f"syn_{i}.csv"
        s.to_csv(p, index=False)
        paths.append(str(p))
    out = tmp_path / "rep.html"
    assert main(["evaluate", str(tmp_path / "real.csv"), *paths, "-o", str(out),
                 "--known", "k", "--synthesised", "x,y", "--radius", "0.1"]) == 0
    text = capsys.readouterr().out
    assert "S_pMSE" in text and "identification risk at 10%" in text
    assert out.exists() and out.with_suffix(".json").exists()
    assert main(["evaluate", str(tmp_path / "real.csv"), paths[0], "-o",
                 str(tmp_path / "real.csv")]) == 2  # never over an input


def test_report_shows_the_privacy_ledger(rng, tmp_path):
    real, syns = _tables(rng, 150)
    ledger = bs.privacy.Ledger()
    ledger.record("noisy marginal k x g", "geometric (exact discrete Laplace)", 0.5,
                  sensitivity=2.0, why="public domain")
    ledger.record("synthetic dataset", "censored pseudo posterior", 1.0, guarantee="local",
                  why="weights fitted on the confidential data")
    path = tmp_path / "ledger.json"
    ledger.to_json(path)
    real.to_csv(tmp_path / "real.csv", index=False)
    syns[0].to_csv(tmp_path / "syn.csv", index=False)
    out = tmp_path / "rep.html"
    assert main(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "-o",
                 str(out), "--ledger", str(path)]) == 0
    page = out.read_text()
    assert "Privacy ledger" in page and "Total epsilon = 1.5" in page
    assert "local / asymptotic" in page
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["privacy_ledger"]["total_epsilon"] == 1.5
    assert main(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "-o",
                 str(out), "--ledger", str(tmp_path / "nope.json")]) == 2

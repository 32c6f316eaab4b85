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
    res = bs.evaluation.report(real, syns, out, known=["k"], synthesized=["x", "g"],
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
                 "--known", "k", "--synthesized", "x,y", "--radius", "0.1"]) == 0
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
    # a report named like its ledger would write its JSON over the ledger: refused
    before = path.read_bytes()
    assert main(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "-o",
                 str(tmp_path / "ledger.html"), "--ledger", str(path)]) == 2
    assert path.read_bytes() == before and not (tmp_path / "ledger.html").exists()


def _fresh(rng, n):
    k = rng.choice(list("ab"), n)
    x = rng.gamma(4.0, 2.0, n)
    return pd.DataFrame({"k": k, "g": rng.choice(list("uvw"), n), "x": x,
                         "y": 10 + 0.3 * x + (k == "a") + rng.normal(0, 2, n)})


def test_fully_synthetic_report_uses_measures_that_fit(rng, tmp_path):
    real, hold = _fresh(rng, 300), _fresh(rng, 300)
    syns = [_fresh(rng, 300) for _ in range(2)]
    out = tmp_path / "full.html"
    res = bs.evaluation.report(real, syns, out, known=["k", "g"], sensitive="y",
                               regression="y ~ x + k", holdout=hold)
    assert res["kind"] == "fully"
    page = out.read_text()
    assert "At a glance" in page and page.index("At a glance") < page.index("Marginal")
    assert "Disclosure risk (fully synthetic data)" in page and "Attribute inference" in page
    assert "Identification risk" not in page  # row matching is for partially synthetic data
    risk = res["fully_synthetic_risk"]["per_dataset"]
    assert {"exact_copy_share", "dcr_ratio", "singling_out_risk"} <= set(risk[0])
    # numbered as the files and the plots' legends are, from 1
    assert [r["dataset"] for r in risk] == [1, 2]
    assert [r["dataset"] for r in res["propensity"]] == [1, 2]
    assert all(r["singling_out_splits"] >= 400 for r in risk)
    assert "<div class='wide'><table" in page  # wide tables scroll instead of running off
    assert all(r["exact_copy_share"] == 0 for r in risk)
    assert all(0.7 < r["dcr_ratio"] < 1.4 for r in risk)
    glance = {g["aspect"]: g for g in res["at_a_glance"]}
    assert set(glance) == {"distinguishability", "inference", "risk"}
    assert 0.3 < glance["distinguishability"]["value"] < 0.7  # same law: AUC near 0.5
    assert glance["risk"]["measure"] == "DCR ratio"
    ai = res["attribute_inference"]
    assert ai["keys"] == ["k", "g"] and 0 <= ai["per_dataset"][0]["cap"] <= 1
    # copies of the training records are caught
    res2 = bs.evaluation.report(real, [real.sample(frac=1, random_state=3)], out, holdout=hold)
    r2 = res2["fully_synthetic_risk"]["per_dataset"][0]
    assert res2["kind"] == "fully" and r2["exact_copy_share"] == 1 and r2["dcr_ratio"] == 0
    # forcing the kind
    res3 = bs.evaluation.report(real, syns[:1], out, kind="partially", known=["k"],
                                synthesized=["x"])
    assert "identification_risk" in res3 and "fully_synthetic_risk" not in res3
    ir = res3["identification_risk"]
    assert {r["dataset"] for r in ir["sweep"]} == {1} and "index" not in ir["sweep"][0]
    risk = {g["aspect"]: g["sentence"] for g in res3["at_a_glance"]}["risk"]
    if ir["best_radius"] != ir["radius"]:
        assert f"at radius {100 * ir['best_radius']:g}%, the radius of those tried" in risk
    glance = {g["aspect"]: g["sentence"] for g in res3["at_a_glance"]}["distinguishability"]
    assert "keep most of their row's real values put it well below 1" in glance


def test_evaluate_with_holdout(rng, tmp_path, capsys):
    _fresh(rng, 200).to_csv(tmp_path / "real.csv", index=False)
    _fresh(rng, 200).to_csv(tmp_path / "hold.csv", index=False)
    _fresh(rng, 200).to_csv(tmp_path / "syn.csv", index=False)
    out = tmp_path / "rep.html"
    assert main(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "-o",
                 str(out), "--holdout", str(tmp_path / "hold.csv"), "--sensitive", "y"]) == 0
    text = capsys.readouterr().out
    assert "fully synthetic" in text and "DCR ratio" in text and "distinguishability" in text
    assert main(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"), "-o",
                 str(tmp_path / "hold.csv"), "--holdout", str(tmp_path / "hold.csv")]) == 2


def test_an_auc_well_below_one_half_is_not_read_as_indistinguishable():
    from bayesynth.evaluation.report import _at_a_glance

    low = _at_a_glance({"propensity": {"auc_gbm": [0.13], "s_pmse": [1.0]}, "kind": "partially"})
    assert "well below 0.5" in low[0]["sentence"] and "chance" not in low[0]["sentence"]
    fair = _at_a_glance({"propensity": {"auc_gbm": [0.52], "s_pmse": [1.0]}, "kind": "partially"})
    assert "hardly better than chance" in fair[0]["sentence"]
    under = _at_a_glance({"propensity": {"auc_gbm": [0.47], "s_pmse": [1.0]},
                          "kind": "partially"})[0]["sentence"]
    assert "no better than chance" in under and "below 0.5 it can also mean" in under


def test_a_singling_out_p_value_near_the_threshold_is_called_borderline():
    """Counted above chance only where the p-value's Monte Carlo interval lies below 0.05;
    one still straddling it after the most splits is reported as at the edge."""
    from bayesynth.evaluation.report import _at_a_glance

    def glance(ps, decided):
        fr = pd.DataFrame({"exact_copy_share": 0.0, "dcr_ratio": 1.0, "dcr_ratio_upper": 1.1,
                           "singling_out_excess": 0.1, "singling_out_chance95": 0.12,
                           "singling_out_p": ps, "singling_out_p_decided": decided})
        res = {"propensity": {"auc_gbm": [0.5], "s_pmse": [1.0]}, "kind": "fully",
               "fully_synthetic_risk": {"per_dataset": fr}}
        return {g["aspect"]: g["sentence"] for g in _at_a_glance(res)}["risk"]

    two = glance([0.01, 0.049], [True, False])
    assert "above what chance gives in 1 of 2 datasets at permutation p < 0.05" in two
    assert "and at its edge in 1, p within 0.005 of 0.05" in two
    assert "above what chance gives, permutation p = 0.010" in glance([0.01], [True])
    assert "at the edge of what chance gives, permutation p = 0.049" in glance([0.049],
                                                                             [False])
    assert "within what chance gives" in glance([0.2], [True])


def test_the_reports_exact_copy_share_matches_across_numeric_dtypes():
    """Without a hold-out the report counts exact copies with the risk module's record keys,
    so a copy written back as float is still a copy."""
    from bayesynth.evaluation.report import _fully_synthetic_risk

    rng = np.random.default_rng(0)
    real = pd.DataFrame({"a": rng.integers(0, 3, 50), "b": rng.integers(0, 100, 50)})
    results: dict = {}
    _fully_synthetic_risk(real, [real.astype(float)], results, [], schema=None, known=(),
                          sensitive=None, holdout=None, random_seed=0)
    assert results["fully_synthetic_risk"]["per_dataset"]["exact_copy_share"].iloc[0] == 1.0


def test_report_says_what_it_did_not_measure(rng, tmp_path):
    """Nothing measured is never printed as a reassuring 0, and partially synthetic data show
    the records kept whole and say the hold-out went unused."""
    real, hold = _fresh(rng, 120), _fresh(rng, 120)
    doubled = pd.concat([real, real], ignore_index=True)  # no synthetic record is unique
    res = bs.evaluation.report(real, doubled, tmp_path / "d.html", holdout=hold)
    risk = {g["aspect"]: g for g in res["at_a_glance"]}["risk"]["sentence"]
    assert "singling-out risk not measured" in risk
    assert res["fully_synthetic_risk"]["per_dataset"][0]["singling_out_attacks"] == 0
    # partially synthetic: a copy of the real table with y replaced, 30 rows
    small = real.iloc[:30].reset_index(drop=True)
    part = small.assign(y=small["y"] + rng.normal(0, 1, 30))
    out = tmp_path / "p.html"
    res = bs.evaluation.report(small, part, out, holdout=hold, sensitive="y", public="x")
    assert res["kind"] == "partially" and "'k' (100% of rows)" in res["kind_note"]
    page = out.read_text()
    assert "Records kept whole" in page and "hold-out data are not used" in page
    assert "of the 15 records with the lowest and the 15 with the highest values" in page
    assert res["partially_synthetic_copies"][0]["own_record_share"] == 0.0

"""Logical rules between variables (synthpop's ``rules`` / ``rvalues``).

A :class:`Rule` says that a column takes a fixed value whenever a condition on other columns
holds, for example "``nociga`` is -8 (not applicable) when ``smoke`` is NO". Rules are stated in
the schema (``Schema(..., rules=[...])`` or the ``"rules"`` list of its JSON). A synthesizer
respects them exactly: the records a rule covers carry no information about the column in the
model (their value is structural), and every synthetic record that meets the condition gets the
rule's value.

:func:`suggest_rules` finds near-deterministic patterns in a table (a level of one column after
which another column almost always takes one value); :func:`bayesynth.infer_schema` reports them
as ``suggested_rules`` without applying them.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bayesynth.errors import MissingColumnError, SchemaError, UnknownLevelError

__all__ = ["Rule", "suggest_rules", "apply_rules", "rule_mask", "structural_rules", "check_rules"]


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    return value


def refuse_unknown_keys(d: Mapping, known: frozenset, where: str) -> None:
    """Refuse a key a schema or rule does not have (a misspelt one would be dropped silently)."""
    import difflib

    odd = [k for k in d if k not in known]
    if odd:
        near = difflib.get_close_matches(str(odd[0]), sorted(known), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise SchemaError(f"Unknown key {odd[0]!r} in {where}{hint}; the keys are "
                          f"{sorted(known)}.")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


@dataclass(frozen=True)
class Rule:
    """``column`` takes ``value`` whenever every condition in ``when`` holds.

    Parameters
    ----------
    column : str
        The column the rule fixes.
    value : scalar or None
        Its value under the condition (``None`` for missing).
    when : tuple of (str, tuple)
        Conditions ``(other_column, levels)``: the other column's value is one of ``levels``
        (``None`` in ``levels`` matches a missing value). All must hold.

    Examples
    --------
    >>> Rule("nociga", -8, (("smoke", ("NO",)),))
    Rule(nociga == -8 if smoke in ['NO'])
    """

    column: str
    value: Any
    when: tuple

    def __post_init__(self) -> None:
        if not self.when:
            raise SchemaError(f"The rule for '{self.column}' has no condition.",
                              column=self.column)
        for col, levels in self.when:
            if col == self.column:
                raise SchemaError(f"The rule for '{self.column}' conditions on the column "
                                  "itself.", column=self.column)
            if not len(levels):
                raise SchemaError(f"The rule for '{self.column}' lists no level of '{col}'.",
                                  column=self.column)

    def __repr__(self) -> str:
        cond = " and ".join(f"{c} in {list(v)}" for c, v in self.when)
        return f"Rule({self.column} == {self.value!r} if {cond})"

    def mask(self, df: pd.DataFrame) -> np.ndarray:
        """Find the records of ``df`` that meet the condition.

        Parameters
        ----------
        df : pandas.DataFrame
            A table with the condition's columns.

        Returns
        -------
        numpy.ndarray of bool
            One entry per record.
        """
        out = np.ones(len(df), dtype=bool)
        for col, levels in self.when:
            s = df[col]
            hit = s.isin([v for v in levels if not _is_missing(v)]).to_numpy()
            if any(_is_missing(v) for v in levels):
                hit = hit | s.isna().to_numpy()  # (pandas may hand out read-only arrays)
            out &= hit
        return out

    def broken(self, df: pd.DataFrame) -> tuple[int, int]:
        """Count the records that meet the condition and those of them that break the rule.

        Parameters
        ----------
        df : pandas.DataFrame
            A table with the rule's columns.

        Returns
        -------
        n_covered : int
            Records that meet the condition.
        n_broken : int
            Of those, the records whose ``column`` does not have the rule's value.
        """
        m = self.mask(df)
        s = df.loc[m, self.column]
        ok = s.isna() if _is_missing(self.value) else (s == self.value)
        return int(m.sum()), int((~ok.to_numpy()).sum())

    def to_dict(self) -> dict[str, Any]:
        """Return the rule in JSON-ready form.

        Returns
        -------
        dict
            ``{"column": ..., "value": ..., "when": {col: [levels]}}``.
        """
        return {"column": self.column, "value": _plain(self.value),
                "when": {c: [_plain(v) for v in levels] for c, levels in self.when}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Rule:
        """Rebuild a rule from :meth:`to_dict`'s form (the inverse of :meth:`to_dict`).

        Parameters
        ----------
        d : mapping
            ``{"column": ..., "value": ..., "when": {col: [levels]}}``; ``when`` may also be a
            sequence of ``(column, levels)`` pairs, and a single level need not be in a list.

        Returns
        -------
        Rule

        Raises
        ------
        bayesynth.errors.SchemaError
            If ``d`` does not have that form.
        """
        refuse_unknown_keys(d, frozenset({"column", "value", "when"}), f"the rule {dict(d)!r}")
        try:
            when = d["when"]
            items = when.items() if isinstance(when, Mapping) else when
            return cls(str(d["column"]), d.get("value"),
                       tuple((str(c), tuple(v if isinstance(v, list | tuple) else [v]))
                             for c, v in items))
        except (KeyError, TypeError, AttributeError):
            raise SchemaError(f"A rule is {{'column': ..., 'value': ..., 'when': {{column: "
                              f"[levels]}}}}; got {dict(d)!r}.") from None


def check_rules(df: pd.DataFrame, rules: Sequence[Rule], *, max_broken: float = 0.01) -> None:
    """Check rules against a table: known columns and levels, and not broken by the data.

    Parameters
    ----------
    df : pandas.DataFrame
    rules : sequence of Rule
    max_broken : float, default 0.01
        Largest share of the records meeting a rule's condition that may break it.

    Raises
    ------
    bayesynth.errors.MissingColumnError
        A rule names a column the table lacks.
    bayesynth.errors.UnknownLevelError
        A condition names a level that never occurs.
    bayesynth.errors.SchemaError
        The data break a rule for more than ``max_broken`` of the records it covers.
    """
    clash = conflicting_rules(rules)
    if clash:
        a, b = clash[0]
        raise SchemaError(
            f"The rules {a!r} and {b!r} set '{a.column}' to different values, and a record can "
            "meet both conditions (synthetic records can combine values the real ones do not): "
            "make the conditions exclusive (add a condition to one of them).", column=a.column)
    for r in rules:
        for col in [r.column] + [c for c, _ in r.when]:
            if col not in df.columns:
                raise MissingColumnError(f"A rule ({r!r}) names column '{col}', which the "
                                         f"table does not have.", column=col)
        for col, levels in r.when:
            if pd.api.types.is_numeric_dtype(df[col].dtype) and not pd.api.types.is_bool_dtype(
                    df[col].dtype) and df[col].nunique() > MEASUREMENT_VALUES:
                # a range of a numeric column (ages 65 to 97) need not all occur, but its
                # values must be numbers ("-8" written as text would never match)
                odd = [v for v in levels if not _is_missing(v) and not (
                    isinstance(v, (int, float, np.integer, np.floating))
                    and not isinstance(v, (bool, np.bool_)))]
                if odd:
                    raise SchemaError(
                        f"The rule {r!r} compares numeric column '{col}' with {odd[0]!r}, "
                        "which is not a number; write it as a number (e.g. -8, not \"-8\").",
                        column=col)
                continue
            present = set(map(_plain, pd.unique(df[col].dropna())))
            for v in levels:
                if not _is_missing(v) and _plain(v) not in present:
                    raise UnknownLevelError(
                        f"The rule {r!r} names level {v!r} of '{col}', which never occurs "
                        f"(levels {sorted(map(str, present))[:10]}).", column=col)
        n, bad = r.broken(df)
        if n == 0 and len(r.when) == 1:
            warnings.warn(f"The rule {r!r} covers no record of the table: its condition never "
                          "holds, so it will never apply. Check its values.", UserWarning,
                          stacklevel=3)
        if n and bad / n > max_broken:
            raise SchemaError(
                f"The data break the rule {r!r} for {bad} of the {n} records it covers "
                f"({bad / n:.1%} > {max_broken:.0%}): the rule would change real patterns. Fix "
                "the rule (or the data), or raise max_broken.", column=r.column)


def _may_overlap(a: Rule, b: Rule) -> bool:
    """Whether some record could meet both rules' conditions (no shared column excludes it)."""
    wa, wb = dict(a.when), dict(b.when)
    for col in set(wa) & set(wb):
        la = {"<NA>" if _is_missing(v) else _plain(v) for v in wa[col]}
        lb = {"<NA>" if _is_missing(v) else _plain(v) for v in wb[col]}
        if not la & lb:
            return False
    return True


def conflicting_rules(rules: Sequence[Rule]) -> list[tuple[Rule, Rule]]:
    """Return the pairs of rules that set one column to different values and may meet.

    Two such rules may meet when no column of both conditions keeps them apart (their
    levels there are disjoint): a synthetic record can then meet both conditions.
    """
    out = []
    for i, a in enumerate(rules):
        for b in rules[i + 1:]:
            if a.column != b.column:
                continue
            same = (_is_missing(a.value) and _is_missing(b.value)) or (
                not _is_missing(a.value) and not _is_missing(b.value)
                and _plain(a.value) == _plain(b.value))
            if not same and _may_overlap(a, b):
                out.append((a, b))
    return out


def structural_rules(rules: Sequence[Rule]) -> tuple[Rule, ...]:
    """Select the rules whose covered records the model treats as carrying no information.

    A rule makes the records it covers structural for its column: the model learns nothing
    about that column from them, and synthesis sets them by the rule. Rules can form a cycle
    ("weight is missing if height is" and "height is missing if weight is"); were every rule
    in it structural, the records the cycle covers would inform none of its columns (on values
    that go missing together, the model would then learn that neither ever goes missing).
    Taking the rules in the order given, a rule that would close a cycle (some column of its
    condition can already be reached from its own column through the rules kept) is left
    out: the records it covers stay informative for its column, and synthesis still enforces it
    (:func:`apply_rules` repeats until no rule changes anything).

    Parameters
    ----------
    rules : sequence of Rule

    Returns
    -------
    tuple of Rule
        The rules kept, in the order given.
    """
    succ: dict[str, set[str]] = {}  # condition column -> the columns its rules fix

    def reaches(a: str, targets: set[str]) -> bool:
        seen, stack = {a}, [a]
        while stack:
            c = stack.pop()
            if c in targets:
                return True
            for d in succ.get(c, ()):
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        return False

    kept = []
    for r in rules:
        conds = {c for c, _ in r.when}
        if reaches(r.column, conds):
            continue
        for c in conds:
            succ.setdefault(c, set()).add(r.column)
        kept.append(r)
    return tuple(kept)


def rule_mask(df: pd.DataFrame, rules: Sequence[Rule], column: str) -> np.ndarray:
    """Find the records whose value of ``column`` is fixed by some rule (structural).

    Only :func:`structural_rules` count: a rule that closes a cycle of rules leaves its
    column's records informative.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    rules : sequence of Rule
        The rules; only the structural ones that fix ``column`` count.
    column : str
        The column.

    Returns
    -------
    numpy.ndarray of bool
        One entry per record: True where some structural rule for ``column`` meets its
        condition.
    """
    out = np.zeros(len(df), dtype=bool)
    for r in structural_rules(rules):
        if r.column == column:
            out |= r.mask(df)
    return out


def apply_rules(df: pd.DataFrame, rules: Sequence[Rule]) -> pd.DataFrame:
    """Return a copy of ``df`` with every rule enforced.

    The rules are applied in the order given, and the pass is repeated while it changes
    anything (a rule can set a value that another rule's condition reads, as in a cycle of
    rules on missing values), at most once per rule more.

    Parameters
    ----------
    df : pandas.DataFrame
    rules : sequence of Rule

    Returns
    -------
    pandas.DataFrame
    """
    out = df.copy()
    for _ in range(len(rules) + 1):
        changed = False
        for r in rules:
            m = r.mask(out)
            col = out[r.column]
            if _is_missing(r.value):
                m &= col.notna().to_numpy()
            else:
                m &= ~(col == r.value).fillna(False).to_numpy(dtype=bool)
            if not m.any():
                continue
            changed = True
            if _is_missing(r.value):
                if pd.api.types.is_integer_dtype(col.dtype) and not isinstance(
                        col.dtype, pd.CategoricalDtype):
                    out[r.column] = col.astype("Int64")
                out.loc[m, r.column] = None
            else:
                out.loc[m, r.column] = r.value
        if not changed:
            break
    else:  # the passes did not settle: rules that undo each other
        broken = [(r, int(r.broken(out)[1])) for r in rules]
        broken = [(r, k) for r, k in broken if k]
        if broken:
            warnings.warn("The rules do not settle: "
                          + "; ".join(f"{r!r} is broken for {k} records" for r, k in broken[:3])
                          + ". Rules that set one column to different values must have "
                          "exclusive conditions.", RuntimeWarning, stacklevel=2)
    return out


#: Largest number of whole numbers a suggested range condition lists
#: (:func:`suggest_rules`).
MAX_RANGE_VALUES = 1000
#: A numeric column with more distinct values than this is a measurement to
#: :func:`check_rules`: a rule's condition on it may list values that never occur (a range).
MEASUREMENT_VALUES = 30
#: A suggested pattern must be one that chance would give with at most this probability over
#: all the (level, column) pairs examined (Bonferroni): see :func:`suggest_rules`.
CHANCE_ALPHA = 0.05


def _range_rules(df: pd.DataFrame, cols: Sequence[str], keyed: Mapping[str, pd.Series], *,
                 min_records: int, max_levels: int) -> list[tuple[int, list[Rule]]]:
    """Rules "A == a if X in lo..hi" where the levels of A split a whole-number X exactly.

    One entry per column A (its split covering the most records): the records it covers and
    its rules, one per level of A. The ranges cover every whole number from X's smallest to
    its largest value: a gap between two levels' observed values is split at its middle.
    """
    wholes = []
    for x in cols:
        v = df[x]
        if not pd.api.types.is_numeric_dtype(v.dtype) or pd.api.types.is_bool_dtype(v.dtype):
            continue
        vals = v.dropna().to_numpy(dtype=float)
        if (len(vals) and np.all(np.isfinite(vals)) and np.all(vals == np.round(vals))
                and len(np.unique(vals)) > max(max_levels, MEASUREMENT_VALUES)):
            wholes.append(x)
    out: list[tuple[int, list[Rule]]] = []
    for a in cols:
        sa = keyed[a]
        counts = sa.value_counts()
        if not 2 <= len(counts) <= max_levels or counts.min() < min_records:
            continue  # (the records with X too are checked below; this saves the loop)
        best: tuple[int, list[Rule]] | None = None
        for x in wholes:
            if x == a:
                continue
            both = sa.notna().to_numpy() & df[x].notna().to_numpy()
            ranges = (pd.DataFrame({"a": sa[both].to_numpy(),
                                    "x": df[x][both].to_numpy(dtype=float)})
                      .groupby("a", sort=False)["x"].agg(["min", "max", "size"])
                      .sort_values("min"))
            lo, hi = ranges["min"].to_numpy(), ranges["max"].to_numpy()
            if (len(ranges) < 2 or ranges["size"].min() < min_records
                    or not (hi[:-1] < lo[1:]).all() or hi[-1] - lo[0] >= MAX_RANGE_VALUES):
                continue
            cut = np.floor((hi[:-1] + lo[1:]) / 2).astype(int)  # last value of each range
            starts = np.r_[int(lo[0]), cut + 1]
            ends = np.r_[cut, int(hi[-1])]
            n = int(ranges["size"].sum())
            if best is None or n > best[0]:
                best = (n, [Rule(a, _plain(level), ((x, tuple(range(s, e + 1))),))
                            for level, s, e in zip(ranges.index, starts, ends)])
        if best is not None:
            out.append(best)
    return out


def _read_through_splits(rule: Rule, splits: Mapping[str, list[Rule]]) -> Rule | None:
    """Rewrite a rule's conditions on a split column as conditions on the column it splits.

    A column A that a split's rules fix from X is not modelled, so a rule may not read it:
    "B == v if A in [a]" becomes "B == v if X in (a's range)". None where a condition lists
    a missing A (no range stands for it).
    """
    when = []
    for col, levels in rule.when:
        if col not in splits:
            when.append((col, levels))
            continue
        by_level = {_plain(r.value): r.when[0] for r in splits[col]}
        if any(_is_missing(v) or _plain(v) not in by_level for v in levels):
            return None
        x = by_level[_plain(levels[0])][0]
        when.append((x, tuple(v for lv in levels for v in by_level[_plain(lv)][1])))
    cols = [c for c, _ in when]
    if rule.column in cols or len(set(cols)) < len(cols):
        return None
    return Rule(rule.column, rule.value, tuple(when))


def suggest_rules(df: pd.DataFrame, *, min_records: int = 20, min_share: float = 0.99,
                  max_levels: int = 30, max_rules: int = 20) -> list[Rule]:
    """Near-deterministic patterns worth stating as rules (not applied).

    For every column A with at most ``max_levels`` distinct values and every level a held by at
    least ``min_records`` records, and every other column B: when one value v of B (a missing
    value counts) covers at least ``min_share`` of the records with A = a but less than 90% of
    the other records, the rule "B == v if A == a" is suggested (v must not be B's only value
    anyway), provided chance would not give it: were B independent of A, with v at its share
    among the other records, n_v or more of the n_a records would hold v with a probability
    below :data:`CHANCE_ALPHA` (0.05) divided by the number of (level, column) pairs examined
    (Bonferroni). On adult this leaves out "native-country == 0 if capital-gain in [6]" and
    "... in [25]" (99 of 100 and 20 of 20 records, where 89.7% of the others are 0: chance
    probabilities 10^-3.6 and 10^-0.9); on SD2011, 14 of the 58 patterns found with no cap on
    their number (none of the 25 returned by default), such as "trustfam == 'YES' if nociga
    in [6]"; on CE and NLTCS nothing. A column with more distinct values (a measurement, a
    year) takes part through its missing values alone: "weight is missing if height is" (a
    missing value of A counts as a level a). The strongest ``max_rules`` are returned, most
    records first. Date and timestamp columns are left out (a rule's values are numbers or
    text).

    *Groups of a whole-number column* (age groups of an age in years): when a column A with 2
    to ``max_levels`` levels, each held by at least ``min_records`` records, splits a column X
    of whole numbers with more than ``max_levels`` (and more than :data:`MEASUREMENT_VALUES`)
    distinct values into disjoint ranges (no record of one level of A has an X between the
    smallest and largest X of another level's records), "A == a if X in lo..hi" is suggested
    for every level, with every whole number from lo to hi listed: the ranges run from X's
    smallest to its largest value, a gap between two levels' values split at its middle (a
    rule's condition is a list of values; a split wider than :data:`MAX_RANGE_VALUES` is not
    suggested). The split must be exact in the data (a record missing either value takes no
    part); where A splits several columns, the split covering the most records is taken.
    Splits come first, each whole and counting as one toward ``max_rules``. Where X has no
    missing value the split fixes A for every record, and the copula does not model a column
    that rules fix, so every other suggestion reads A through X ("B == v if A in [a]" becomes
    "B == v if X in a's range"; one on a missing A is left out). Without these rules the copula
    draws the group and the value through their correlation alone, so synthetic groups
    disagree with the values (a table of 300 ages and their four groups, ``bayesynth
    synthesize --draws 200 --seed 1``: 36 of 300 synthetic records, none with the rules).

    Suggestions are left out where they could set a column to another value than a stronger
    suggestion does (:func:`conflicting_rules`), so that all of them can be stated together.

    Values that go missing together matter to the copula: without the rule the model can only
    reproduce "B is missing whenever A is" with a latent correlation of 1 between the two
    missingness indicators, whose columns then have no residual variance, which makes the
    sampler mix very slowly (``benchmarks/README.md``, SD2011).

    Parameters
    ----------
    df : pandas.DataFrame
    min_records : int, default 20
    min_share : float, default 0.99
    max_levels : int, default 30
    max_rules : int, default 20

    Returns
    -------
    list of Rule
    """
    from scipy.stats import binom

    candidates: list[tuple[int, int, float, Rule]] = []
    examined = 0
    # Date and timestamp columns take no part: a rule's values are JSON numbers or text, and
    # a date value would be neither.
    cols = [c for c in df.columns if not pd.api.types.is_datetime64_any_dtype(df[c].dtype)]
    keyed = {c: df[c].astype(object).where(df[c].notna(), None) for c in cols}
    for a in cols:
        sa = keyed[a]
        counts = sa.value_counts(dropna=False)
        if len(counts) < 2:
            continue
        many = len(counts) > max_levels  # then only "A is missing" is a condition
        for level, n_a in counts.items():
            if n_a < min_records or (many and not _is_missing(level)):
                continue
            in_a = (sa.isna() if _is_missing(level) else sa == level).to_numpy()
            for b in cols:
                if b == a:
                    continue
                sb = keyed[b]
                examined += 1
                vc = sb[in_a].value_counts(dropna=False)
                v, n_v = vc.index[0], int(vc.iloc[0])
                if n_v / n_a < min_share:
                    continue
                rest = sb[~in_a]
                share_rest = float((rest.isna() if _is_missing(v) else rest == v).mean())
                if share_rest >= 0.9:
                    continue
                candidates.append((int(n_a), n_v, share_rest,
                                   Rule(b, _plain(v), ((a, (_plain(level),)),))))
    # Chance: a level of 20 records all at a value that 90% of the other records hold happens
    # 12% of the time, and thousands of pairs are examined (adult: "native-country == 0 if
    # capital-gain in [25]"). Keep a pattern only where independence (v at its share among
    # the other records) gives n_v or more of the n_a records less often than CHANCE_ALPHA
    # over all the pairs examined.
    bound = np.log(CHANCE_ALPHA / max(examined, 1))
    found = [(n_a, r) for n_a, n_v, share, r in candidates
             if binom.logsf(n_v - 1, n_a, share) <= bound]
    # Splits first (each states a column exactly from another), whole, each counting as one
    # rule; then the rest, strongest first, each leaving out where it could set a column to
    # another value than a suggestion before it, so that all can be stated together.
    out: list[Rule] = []
    taken = 0
    fixed: dict[str, list[Rule]] = {}
    for _, rules in sorted(_range_rules(df, cols, keyed, min_records=min_records,
                                        max_levels=max_levels), key=lambda t: -t[0]):
        if taken >= max_rules:  # (splits set different columns: they never conflict)
            break
        out += rules
        taken += 1
        if df[rules[0].when[0][0]].notna().all():  # the split fixes its column everywhere
            fixed[rules[0].column] = rules
    found.sort(key=lambda t: -t[0])
    seen = {(r.column, r.when) for r in out}
    for _, r in found:
        if taken >= max_rules:
            break
        # a column the rules fix everywhere is not modelled: read it through its split
        r = _read_through_splits(r, fixed)
        if r is None or (r.column, r.when) in seen or any(
                conflicting_rules([o, r]) for o in out):
            continue
        seen.add((r.column, r.when))
        out.append(r)
        taken += 1
    return out

"""A privacy ledger: every differentially private release, what it cost and why.

Each function of bayesynth that releases something under differential privacy records an entry:
the mechanism, the neighbour relation, the sensitivity, epsilon, whether the guarantee is strict
or only local/asymptotic, and the assumptions it rests on. The ledger composes its entries:

* sequential composition: entries on the same records add up;
* parallel composition: entries that share a ``partition`` name and have different ``part``
  labels were computed on disjoint sets of records (strata), and the partition costs its most
  expensive part. Under add/remove neighbours one record touches one part: exact. Under
  change-one a replaced record can leave one part and join another, so each part must be
  released under add/remove neighbours (a part released under change-one may reveal its size,
  which the move changes): a record moving from part A to part B costs
  ``eps_A + eps_B <= 2 max eps``, and a record changing inside part A costs ``2 eps_A`` (group
  privacy), so the partition costs twice its largest add/remove epsilon, which is what the
  converted entries hold.

An entry made under add/remove neighbours and entered into a change-one ledger costs twice its
epsilon (a change is a removal and an addition); the reverse conversion does not exist, and is
refused.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from bayesynth._io import atomic_write_text
from bayesynth.errors import InvalidParameterError
from bayesynth.privacy.neighbours import DESCRIPTIONS, check_neighbours

__all__ = ["GUARANTEES", "LedgerEntry", "Ledger"]

GUARANTEES = ("strict", "local", "none")
_GUARANTEE_TEXT = {
    "strict": "epsilon-DP",
    "local": "local / asymptotic only",
    "none": "not differentially private",
}


@dataclass(frozen=True)
class LedgerEntry:
    """One release.

    Attributes
    ----------
    release : str
        What was released ("noisy marginal age x sex", "synthetic dataset 1 of 3").
    mechanism : str
        How ("geometric", "exponential (PrivBayes selection)", "censored pseudo posterior").
    neighbours : str
        The neighbour relation of ``epsilon`` ("change_one" or "add_remove").
    epsilon : float
        Privacy loss of the release; ``inf`` when there is no guarantee.
    guarantee : {"strict", "local", "none"}
        ``strict``: epsilon-DP under the stated assumptions. ``local``: holds only locally to
        the confidential dataset or asymptotically in n (the pseudo-posterior weights fitted on
        the data). ``none``: no differential-privacy guarantee.
    sensitivity : float, optional
        Of the released statistic (the score for the exponential mechanism), under the entry's
        ``neighbours``. A converted entry carries twice the add/remove value (a change is a
        removal and an addition), as it carries twice the epsilon.
    why : str
        The assumptions the guarantee rests on, or why it does not hold.
    seeded : bool
        The noise came from a fixed random seed (reproducible by anyone who knows it).
    partition, part : str, optional
        Parallel composition: entries of one ``partition`` with different ``part`` labels used
        disjoint sets of records.
    converted_from : str, optional
        The relation the mechanism was stated under, when the entry was converted.
    """

    release: str
    mechanism: str
    neighbours: str
    epsilon: float
    guarantee: str = "strict"
    sensitivity: float | None = None
    why: str = ""
    seeded: bool = False
    partition: str | None = None
    part: str | None = None
    converted_from: str | None = None


@dataclass
class Ledger:
    """The privacy ledger of a release.

    Parameters
    ----------
    neighbours : {"change_one", "add_remove"}, default "change_one"
        The relation the total is stated under.
    entries : list of LedgerEntry, optional

    Examples
    --------
    >>> from bayesynth.privacy import Ledger
    >>> ledger = Ledger()
    >>> _ = ledger.record("histogram of age", "geometric", 0.5, sensitivity=2)
    >>> _ = ledger.record("histogram of income", "geometric", 0.5, sensitivity=2)
    >>> ledger.total_epsilon
    1.0
    """

    neighbours: str = "change_one"
    entries: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_neighbours(self.neighbours)
        entries, self.entries = list(self.entries), []
        for e in entries:
            self.add(e)

    # ----------------------------------------------------------------------------- recording

    def record(self, release: str, mechanism: str, epsilon: float, *,
               neighbours: str | None = None, guarantee: str = "strict",
               sensitivity: float | None = None, why: str = "", seeded: bool = False,
               partition: str | None = None, part: str | None = None) -> LedgerEntry:
        """Record one release and return its entry (as stored, after any conversion).

        Parameters
        ----------
        release, mechanism : str
        epsilon : float
            Its privacy loss (``math.inf`` when ``guarantee="none"``).
        neighbours : str, optional
            The relation the mechanism was stated under (default: the ledger's).
        guarantee : {"strict", "local", "none"}
        sensitivity : float, optional
        why : str
        seeded : bool
        partition, part : str, optional
            See :class:`LedgerEntry`.

        Returns
        -------
        LedgerEntry
        """
        entry = LedgerEntry(release, mechanism, neighbours or self.neighbours,
                            float(epsilon), guarantee, sensitivity, why, bool(seeded), partition,
                            part)
        return self.add(entry)

    def add(self, entry: LedgerEntry) -> LedgerEntry:
        """Add an entry, converting add/remove epsilons into a change-one ledger (x 2).

        Parameters
        ----------
        entry : LedgerEntry
            The release to add.

        Returns
        -------
        LedgerEntry
            The entry as stored (converted to change-one neighbours where needed).

        Raises
        ------
        bayesynth.errors.InvalidParameterError
            If the entry's neighbours, guarantee, epsilon or partition are invalid or cannot
            be composed in this ledger.
        """
        check_neighbours(entry.neighbours)
        if entry.guarantee not in GUARANTEES:
            raise InvalidParameterError(f"guarantee must be one of {GUARANTEES}; got "
                                        f"{entry.guarantee!r}.", column="guarantee")
        if math.isnan(entry.epsilon) or entry.epsilon < 0:
            raise InvalidParameterError(f"A ledger epsilon must be >= 0 (inf for no "
                                        f"guarantee); got {entry.epsilon!r}.", column="epsilon")
        if (entry.partition is None) != (entry.part is None):
            raise InvalidParameterError("Give both partition and part (parallel composition) "
                                        "or neither.", column="partition")
        if (entry.partition is not None and self.neighbours == "change_one"
                and entry.neighbours == "change_one" and entry.converted_from is None):
            raise InvalidParameterError(
                "Parallel composition under change-one neighbours needs each part released "
                "under add/remove neighbours (a replaced record can move between parts, and a "
                "part released under change-one may reveal its size). Release the parts with "
                "neighbours='add_remove'.", column="partition")
        if entry.neighbours != self.neighbours:
            if entry.neighbours == "add_remove" and self.neighbours == "change_one":
                entry = replace(entry, neighbours="change_one", epsilon=2 * entry.epsilon,
                                sensitivity=(None if entry.sensitivity is None
                                             else 2 * entry.sensitivity),
                                converted_from="add_remove")
            else:
                raise InvalidParameterError(
                    "A release that is DP under change-one neighbours has no guarantee under "
                    "add/remove neighbours (it may reveal n); record it in a change-one ledger.",
                    column="neighbours")
        self.entries.append(entry)
        return entry

    def extend(self, other: Ledger | Iterable[LedgerEntry], *, partition: str | None = None,
               part: str | None = None) -> Ledger:
        """Add every entry of another ledger (or iterable of entries); returns ``self``.

        Parameters
        ----------
        other : Ledger or iterable of LedgerEntry
        partition, part : str, optional
            Tag the entries as one part of a partition of the records (parallel composition).

        Returns
        -------
        Ledger
            ``self``; nothing is added unless every entry is valid.
        """
        entries = list(other.entries if isinstance(other, Ledger) else other)
        if partition is not None or part is not None:
            if partition is None or part is None:
                raise InvalidParameterError("Give both partition and part.", column="partition")
            nested = sorted({e.partition for e in entries if e.partition is not None})
            if nested:
                raise InvalidParameterError(
                    f"Entries already in partition(s) {nested} cannot be tagged as a part of "
                    f"partition '{partition}': nested partitions are not composed here. Add "
                    "them without partition=, or compose the inner ledger's total first.",
                    column="partition")
            entries = [replace(e, partition=str(partition), part=str(part)) for e in entries]
        staged = Ledger(self.neighbours, list(self.entries))  # validate all before adding any
        for e in entries:
            staged.add(e)
        self.entries = staged.entries
        return self

    # ----------------------------------------------------------------------------- totals

    @property
    def total_epsilon(self) -> float:
        """The composed privacy loss (``inf`` when any entry carries no guarantee)."""
        if any(e.guarantee == "none" for e in self.entries):
            return math.inf  # whatever epsilon such an entry states, it bounds nothing
        total = 0.0
        parts: dict[str, dict[str, float]] = {}
        for e in self.entries:
            if e.partition is None:
                total += e.epsilon
            else:
                by_part = parts.setdefault(e.partition, {})
                by_part[e.part] = by_part.get(e.part, 0.0) + e.epsilon
        for by_part in parts.values():
            total += max(by_part.values())
        return float(total)

    @property
    def guarantee(self) -> str:
        """The weakest guarantee among the entries ("strict" for an empty ledger)."""
        order = {g: i for i, g in enumerate(GUARANTEES)}
        return max((e.guarantee for e in self.entries), key=order.__getitem__,
                   default="strict")

    @property
    def seeded(self) -> bool:
        """Whether any release drew its noise from a fixed seed."""
        return any(e.seeded for e in self.entries)

    def summary(self) -> str:
        """Describe the total privacy loss and what it means, in one sentence.

        Returns
        -------
        str
        """
        if not self.entries:
            return "Nothing has been released."
        g = self.guarantee
        rel = DESCRIPTIONS[self.neighbours]
        if g == "none":
            k = sum(e.guarantee == "none" for e in self.entries)
            text = f"Not differentially private: {k} release(s) carry no guarantee."
        else:
            text = (f"Total epsilon = {self.total_epsilon:.6g} under {self.neighbours} "
                    f"neighbours ({rel})")
            text += "." if g == "strict" else (", but only as a local / asymptotic guarantee, "
                                               "not strict epsilon-DP.")
        if self.seeded:
            text += " Some noise came from a fixed seed (reproducible, so removable)."
        return text

    # ----------------------------------------------------------------------------- output

    def to_frame(self) -> pd.DataFrame:
        """Tabulate the entries.

        Returns
        -------
        pandas.DataFrame
            One row per entry, one column per :class:`LedgerEntry` field.
        """
        cols = ["release", "mechanism", "neighbours", "epsilon", "guarantee", "sensitivity",
                "why", "seeded", "partition", "part", "converted_from"]
        return pd.DataFrame([asdict(e) for e in self.entries], columns=cols)

    def __str__(self) -> str:
        if not self.entries:
            return "Privacy ledger: nothing released."
        df = self.to_frame()[["release", "mechanism", "epsilon", "guarantee", "sensitivity",
                              "seeded", "converted_from"]]
        df["guarantee"] = df["guarantee"].map(_GUARANTEE_TEXT)
        if df["converted_from"].isna().all():
            df = df.drop(columns="converted_from")
        else:  # say which entries were stated under the other relation
            df = df.rename(columns={"converted_from": "stated under"}).fillna({"stated under": ""})
        return (f"Privacy ledger ({self.neighbours} neighbours)\n"
                f"{df.to_string(index=False)}\n{self.summary()}")

    def _repr_html_(self) -> str:
        df = self.to_frame().drop(columns=["partition", "part", "converted_from"])
        return f"<p>{self.summary()}</p>" + df.to_html(index=False)

    def to_dict(self) -> dict:
        """Return the ledger as a JSON-ready dict (``inf`` written as ``null``).

        Returns
        -------
        dict
            ``neighbours``, ``total_epsilon``, ``guarantee``, ``summary`` and ``entries``.
        """
        def clean(e: LedgerEntry) -> dict:
            d = asdict(e)
            d["epsilon"] = None if math.isinf(e.epsilon) else e.epsilon
            return d

        total = self.total_epsilon
        return {"neighbours": self.neighbours, "total_epsilon": None if math.isinf(total)
                else total, "guarantee": self.guarantee, "summary": self.summary(),
                "entries": [clean(e) for e in self.entries]}

    def to_json(self, path: str | os.PathLike) -> None:
        """Write the ledger as JSON, atomically (beside the release it describes).

        Parameters
        ----------
        path : path-like
            The JSON file.
        """
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2))

    @classmethod
    def from_dict(cls, d: dict) -> Ledger:
        """Rebuild a ledger written by :meth:`to_dict`.

        Parameters
        ----------
        d : dict
            The output of :meth:`to_dict`.

        Returns
        -------
        Ledger
        """
        entries = []
        for e in d.get("entries", []):
            e = dict(e)
            e["epsilon"] = math.inf if e["epsilon"] is None else float(e["epsilon"])
            entries.append(LedgerEntry(**e))
        # through add(): validated, and an entry stated under the other relation converted
        # (entries converted when first recorded carry the ledger's relation: unchanged)
        return cls(d.get("neighbours", "change_one"), entries)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> Ledger:
        """Read a ledger written by :meth:`to_json`.

        Parameters
        ----------
        path : path-like
            The JSON file.

        Returns
        -------
        Ledger
        """
        with open(path) as f:
            return cls.from_dict(json.load(f))

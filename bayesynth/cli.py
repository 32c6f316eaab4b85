"""The ``bayesynth`` command line.

::

    bayesynth synthesize INPUT.csv -o OUT.csv [--m M] [--schema schema.json] [--draws D] [--seed S]
    bayesynth schema INPUT.csv
    bayesynth evaluate REAL.csv SYN.csv [SYN_2.csv ...] -o report.html [--known a,b] ...
    bayesynth saturate INPUT.csv -o OUT.csv [--variables a,b,c] [--count n] [--family nbi]
                       [--sigma 0.1] [--alpha 0] [--max-risk 0.5] [--m M] [--microdata]
                       (--max-risk chooses the family, sigma and alpha: not with those three)
    bayesynth demo

CSV files are read with only empty fields as missing values (so labels such as "NA" or "None"
stay labels). Output files are written atomically and never over the input.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from bayesynth._io import atomic_write
from bayesynth.errors import BayesynthError, InputTypeError, OutputExistsError
from bayesynth.evaluation._values import number_text

__all__ = ["main", "read_table", "output_paths"]


#: Date and timestamp layouts recognised in text columns, most specific first.
DATE_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d",
                "%Y/%m/%d", "%d/%m/%Y", "%m/%d/%Y", "%d.%m.%Y", "%Y-%m")
DELIMITERS = ",;\t|"
#: Layouts that can read the same text as different dates.
_AMBIGUOUS = {"%d/%m/%Y": "%m/%d/%Y", "%m/%d/%Y": "%d/%m/%Y"}


def _sniff_delimiter(path: Path) -> str:
    import csv

    with open(path, newline="", encoding="utf-8-sig") as fh:
        sample = fh.read(64 * 1024)
    if not sample.strip():
        raise BayesynthError(f"Input file '{path}' is empty.")
    try:
        return csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        return ","


def _header(path: Path, sep: str) -> list[str]:
    import csv

    with open(path, newline="", encoding="utf-8-sig") as fh:
        return next(csv.reader(fh, delimiter=sep), [])


def _parse_dates(df: pd.DataFrame) -> dict[str, str]:
    """Turn text columns that are all dates (one layout per column) into datetimes, in place.

    Returns the layout of each converted column, so that output is written back in it.
    """
    formats: dict[str, str] = {}
    for c in df.columns:
        s = df[c]
        if not (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)):
            continue
        values = s.dropna().astype(str)
        if values.empty or not values.str.match(r"^\d{1,4}[-/.]\d{1,2}").all():
            continue
        for fmt in DATE_FORMATS:
            parsed = pd.to_datetime(values, format=fmt, errors="coerce")
            if parsed.notna().all():
                other = _AMBIGUOUS.get(fmt)
                if other and pd.to_datetime(values, format=other, errors="coerce").notna().all():
                    raise BayesynthError(
                        f"Column '{c}': every date reads both as {fmt} and as {other} (no day "
                        "above 12), so which is the day cannot be told. Write the column as "
                        "YYYY-MM-DD (or add a date with a day above 12).")
                df[c] = pd.to_datetime(s, format=fmt)
                formats[str(c)] = fmt
                break
    return formats


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV file the way a user means it.

    * the delimiter (comma, semicolon, tab or bar) is detected; in a semicolon file, text
      columns that are all numbers written with a decimal comma ("70,5") are numbers, and
      output is written back with decimal commas;
    * duplicate column names are refused (pandas would rename them silently);
    * only empty fields are missing values (so labels such as "NA" or "None" stay labels);
    * text columns that are all dates or timestamps in one layout become datetime columns,
      and their layout is kept in ``df.attrs["date_formats"]`` for writing output back.

    Parameters
    ----------
    path : str or pathlib.Path
        The CSV file.

    Returns
    -------
    pandas.DataFrame
        The table; ``df.attrs`` holds ``date_formats`` (column -> layout), ``delimiter``,
        ``decimal`` and ``fixed_decimals`` (column -> d, for numbers all written with d
        decimals, "3260.10": output pads them alike; other numbers are written in their
        shortest form at their column's precision).

    Raises
    ------
    bayesynth.errors.BayesynthError
        The file is absent, empty, not UTF-8 or not parseable as CSV, or has duplicate
        column names.
    """
    path = Path(path)
    if not path.exists():
        raise BayesynthError(f"Input file '{path}' does not exist.")
    try:
        sep = _sniff_delimiter(path)
        names = _header(path, sep)
    except UnicodeDecodeError as err:
        raise BayesynthError(f"Input file '{path}' cannot be read as a UTF-8 CSV file: "
                             f"{err}. Save it as UTF-8.") from err
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BayesynthError(
            f"Input file '{path}' has duplicate column names {dup}. Rename them so that every "
            "column has its own name.")
    try:
        df = pd.read_csv(path, sep=sep, keep_default_na=False, na_values=[""])
        numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c].dtype)]
        fixed: dict[str, int] = {}
        if numeric:  # zero-padded codes ("01", "007") are labels: keep them as written
            raw = pd.read_csv(path, sep=sep, keep_default_na=False, na_values=[""], dtype=str,
                              usecols=numeric)
            for c in numeric:
                if raw[c].dropna().str.match(r"^-?0\d").any():
                    df[c] = raw[c]
                elif (d := _fixed_decimals(raw[c])) is not None:
                    fixed[str(c)] = d
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise BayesynthError(f"Input file '{path}' cannot be read as a UTF-8 CSV file: "
                             f"{err}") from err
    decimal = "."
    if sep == ";":  # semicolon files often write decimals with a comma ("70,5")
        for c in df.columns:
            s = df[c]
            if not (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)):
                continue
            text = s.dropna().astype(str)
            if (not text.empty and text.str.fullmatch(r"-?\d+(,\d+)?").all()
                    and text.str.contains(",").any()):
                df[c] = pd.to_numeric(s.str.replace(",", ".", regex=False))
                decimal = ","
                if (d := _fixed_decimals(text)) is not None:
                    fixed[str(c)] = d
    if df.shape[1] == 1:
        print(f"bayesynth: note: '{path}' has a single column (no ',', ';', tab or '|' "
              "delimiter found in its first lines).", file=sys.stderr)
    df.attrs["date_formats"] = _parse_dates(df)
    df.attrs["delimiter"] = sep
    df.attrs["decimal"] = decimal
    df.attrs["fixed_decimals"] = fixed
    return df


def _fixed_decimals(text: pd.Series) -> int | None:
    """Return d where every value is written with exactly d > 0 decimals ("3260.10").

    Whole negative numbers (special codes such as -8) may stand beside them. None where the
    values are written in their shortest forms ("12.5", "3", "0.125"): output then is too.
    """
    t = text.dropna().astype(str).str.strip()
    frac = t.str.extract(r"^-?\d*[.,](\d+)$")[0]
    has = frac.notna()
    if not has.any():
        return None
    lengths = frac[has].str.len()
    d = int(lengths.max())
    if (lengths == d).all() and (has | t.str.fullmatch(r"-\d+")).all():
        return d
    return None


def output_paths(output: str | Path, m: int) -> list[Path]:
    """Return the output file names of ``m`` synthetic datasets.

    Parameters
    ----------
    output : str or pathlib.Path
        The ``-o`` path, e.g. ``OUT.csv``.
    m : int
        Number of datasets.

    Returns
    -------
    list of pathlib.Path
        ``[OUT.csv]`` for one dataset; ``OUT_1.csv`` ... ``OUT_m.csv`` for several (suffix
        ``.csv`` when ``output`` has none).
    """
    out = Path(output)
    if m == 1:
        return [out]
    suffix = out.suffix or ".csv"
    return [out.with_name(f"{out.stem}_{i}{suffix}") for i in range(1, m + 1)]


def _check_outputs(inputs: Sequence[Path], outputs: Sequence[Path], overwrite: bool) -> None:
    resolved_in = {p.resolve() for p in inputs}
    for out in outputs:
        if out.is_dir():  # checked before any work (writing failed only at the end)
            raise OutputExistsError(
                f"Output '{out}' is a folder; give the path of a file to write (e.g. "
                f"'{out / 'synthetic.csv'}').")
        for parent in out.resolve().parents:
            if parent.exists():
                if not parent.is_dir():
                    raise OutputExistsError(f"Output '{out}': '{parent}' is a file, so '{out}' "
                                            "cannot be written; choose another -o path.")
                break
        if out.resolve() in resolved_in:
            raise OutputExistsError(
                f"Output '{out}' is an input file; bayesynth never overwrites its input. "
                "Choose another -o path."
            )
        if out.exists() and not overwrite:
            raise OutputExistsError(
                f"Output '{out}' exists. Remove it, choose another -o path, or pass --overwrite."
            )


def _check_model_dir(path: Path, keep: Sequence[Path], overwrite: bool) -> None:
    """Refuse a ``--save-model`` folder that would destroy a file (checked before fitting).

    Saving replaces the whole folder, so it must not be a file, hold an input or an output of
    this run, or (without ``--overwrite``) exist at all.
    """
    target = path.resolve()
    if path.exists() and not path.is_dir():
        raise OutputExistsError(
            f"--save-model '{path}' is a file; give the path of a folder to create.")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise OutputExistsError(
                    f"--save-model '{path}': '{parent}' is a file, so the folder cannot be "
                    "created there; choose another path.")
            break
    for p in keep:
        q = p.resolve()
        if q == target or target in q.parents:
            raise OutputExistsError(
                f"--save-model '{path}' would replace the folder holding '{p}', a file of this "
                "run; choose another folder.")
    if path.exists() and not overwrite:
        raise OutputExistsError(
            f"--save-model '{path}' exists (saving replaces the whole folder). Remove it, "
            "choose another folder, or pass --overwrite.")


def _for_csv(df: pd.DataFrame, like: pd.DataFrame | None = None, schema=None,
             decimal: str = ".") -> pd.DataFrame:
    """Return the table as it should be written to CSV.

    Dates are in the input's layout, whole numbers without a decimal point, other numbers at
    their column's precision.
    """
    out = df.copy()
    formats = (like.attrs.get("date_formats", {}) if like is not None else {})
    fixed = (like.attrs.get("fixed_decimals", {}) if like is not None else {})
    for c in out.columns:
        s = out[c]
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            out[c] = s.dt.strftime(formats.get(str(c), "%Y-%m-%d %H:%M:%S"))
            continue
        if str(c) in formats:  # dates held as labels (a saturated table's levels)
            out[c] = pd.to_datetime(s.astype(object)).dt.strftime(formats[str(c)])
            continue
        if isinstance(s.dtype, pd.CategoricalDtype) and pd.api.types.is_float_dtype(
                s.cat.categories.dtype):
            s = s.astype(float)
            if schema is None or c not in schema:
                # numbers as labels (a saturated table's levels): each as its shortest exact
                # text (3, not 3.0), with the input's decimal separator (1,5 stays 1,5)
                text = ["" if not np.isfinite(v) else number_text(v) for v in s.to_numpy()]
                out[c] = [x.replace(".", decimal) for x in text] if decimal != "." else text
                continue
        if not pd.api.types.is_float_dtype(s.dtype):
            continue
        col = schema[c] if schema is not None and c in schema else None
        x = s.to_numpy(dtype=float)
        finite = np.isfinite(x)
        whole = bool(finite.any() and np.all(x[finite] == np.round(x[finite])))
        if (col is not None and col.integer) or (whole and (
                col is None or col.decimals == 0
                or col.type not in ("count", "continuous"))):
            out[c] = s.round().astype("Int64")
        elif col is not None and col.decimals:
            # at the column's decimals, special codes as themselves: padded where the input
            # wrote every value so (3260.10 stays 3260.10, not 3260.1), else in the shortest
            # form (12.5, not 12.5000, beside values with four decimals)
            d, codes = int(col.decimals), {float(v) for v in col.special_codes}
            pad = str(c) in fixed
            text = [("" if not np.isfinite(v) else number_text(v) if v in codes
                     else f"{v:.{d}f}" if pad else number_text(round(v, d))) for v in x]
            out[c] = [t.replace(".", decimal) for t in text] if decimal != "." else text
        elif col is not None and col.decimals is not None:
            out[c] = s.round(col.decimals)
    return out


def _write_csv(df: pd.DataFrame, path: Path, like: pd.DataFrame | None = None,
               schema=None, sep: str | None = None) -> None:
    delim = sep or (like.attrs.get("delimiter", ",") if like is not None else ",")
    decimal = like.attrs.get("decimal", ".") if like is not None else "."
    frame = _for_csv(df, like, schema, decimal)
    atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False, sep=delim, decimal=decimal))


def _write_all(items: Sequence[tuple[pd.DataFrame, Path]], like: pd.DataFrame | None = None,
               schema=None, quiet: bool = False) -> None:
    """Write every table or none: a stop half-way removes the files this call wrote."""
    written: list[Path] = []
    try:
        for frame, path in items:
            _write_csv(frame, path, like, schema)
            written.append(path)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    if not quiet:
        for frame, path in items:
            print(f"wrote {path} ({len(frame):,} rows)")


#: The column types ``bayesynth schema`` takes as options (``--categorical A,B`` ...).
_TYPE_OPTIONS = ("categorical", "ordinal", "binary", "count", "continuous")


def _special_codes_option(items: Sequence[str] | None) -> dict[str, list[float]]:
    """Read ``--special-codes COL=V[,V...]`` (repeatable; ``COL=`` declares none)."""
    out: dict[str, list[float]] = {}
    for item in items or ():
        name, sep, values = item.rpartition("=")  # a code has no "=", a name may
        name = name.strip()
        if not sep or not name:
            raise BayesynthError(
                f"--special-codes takes COLUMN=CODE[,CODE...], such as nofriend=-8; got "
                f"{item!r}.")
        codes = []
        for v in _split(values):
            try:
                codes.append(float(v))
            except ValueError:
                raise BayesynthError(
                    f"--special-codes {item!r}: {v!r} is not a number; a code is a number, "
                    "such as -8.") from None
        if name in out:
            raise BayesynthError(
                f"--special-codes names column {name!r} twice; give all its codes once, such "
                f"as {name}=-8,-9.")
        out[name] = [int(c) if c.is_integer() else c for c in codes]
    return out


def _cmd_schema(args: argparse.Namespace) -> int:
    from bayesynth.schema import infer_schema

    df = read_table(args.input)
    types = {k: _split(getattr(args, k)) for k in _TYPE_OPTIONS}
    codes = _special_codes_option(args.special_codes)
    try:
        schema = infer_schema(df, **types, special_codes=codes)
    except BayesynthError as err:  # say the options' names, not the keywords'
        raise type(err)(_option_spelling(str(err)), column=err.column) from None
    print(schema.to_json())
    return 0


def _option_spelling(message: str) -> str:
    """Return ``infer_schema``'s message about its keywords with the command line's options.

    ``special_codes names ...`` becomes ``--special-codes names ...`` and ``categorical=[...]
    names ...`` becomes ``--categorical names ...``; other messages are returned unchanged.
    """
    message = re.sub(r"^special_codes (names|gives) ", r"--special-codes \1 ", message)
    return re.sub(rf"^({'|'.join(_TYPE_OPTIONS)})=\[\.\.\.\] names ", r"--\1 names ", message)


def _cmd_saturate(args: argparse.Namespace) -> int:
    from bayesynth.evaluation import expected_tau, tune_saturated
    from bayesynth.evaluation.counts import DEFAULT_ALPHAS, DEFAULT_SIGMAS
    from bayesynth.synthesis import synthesize_table
    from bayesynth.tables import microdata_to_table, table_to_microdata

    if args.m < 1:
        raise BayesynthError(f"--m must be at least 1; got {args.m}.")
    outputs = output_paths(args.output, args.m)
    _check_outputs([Path(args.input)], outputs, args.overwrite)
    df = read_table(args.input)
    if len(df) == 0:
        raise BayesynthError(f"'{args.input}' has no records (a header only): nothing to "
                             "synthesize.")
    variables = _split(args.variables) or [c for c in df.columns if c != args.count]
    table = microdata_to_table(df, variables, count=args.count)
    if not args.microdata and (args.count or "count") in table.names:
        raise BayesynthError(
            f"The variable '{args.count or 'count'}' has the name of the output's count "
            "column; rename it in the input, or write records with --microdata.")
    given = [f"--{k}" for k in ("family", "sigma", "alpha") if getattr(args, k) is not None]
    if args.max_risk is not None and given:
        raise BayesynthError(f"--max-risk chooses the family, sigma and alpha itself; drop "
                             f"{', '.join(given)} or --max-risk.")
    family = args.family or "nbi"
    if family == "poisson" and args.sigma not in (None, 0.0):
        raise BayesynthError("--sigma has no effect on the Poisson family (it has no "
                             "dispersion); drop --sigma, or choose --family nbi, pig or dpo.")
    setting = {"family": family,
               "sigma": (0.0 if family == "poisson" else 0.1) if args.sigma is None
               else args.sigma,
               "alpha": 0.0 if args.alpha is None else args.alpha}
    if args.max_risk is not None:
        try:
            choice = tune_saturated(table, max_risk=args.max_risk)
        except ValueError as err:
            low = getattr(err, "reachable", None)
            if low is None:
                raise BayesynthError(str(err)) from err
            raise BayesynthError(
                f"No setting bayesynth searches (families poisson, nbi and pig, sigma up to "
                f"{max(DEFAULT_SIGMAS):g}, alpha up to {max(DEFAULT_ALPHAS):g}) has expected "
                f"tau_4(1) <= {args.max_risk:g}; the lowest is {low:.4f}. Give --max-risk "
                f"{np.ceil(low * 1e4) / 1e4:.4f} or more, or choose --family, --sigma and --alpha "
                "yourself (the command prints the risk of the setting it runs; for poisson, "
                "nbi and pig a larger --alpha, and for nbi and pig a larger --sigma, lowered it "
                "on every setting measured; for dpo a larger --alpha can raise it).") from err
        setting = choice.as_kwargs()
    tau = expected_tau(table, **setting, ks=(1, 2))
    if not args.quiet:
        print(f"table: {table.n_cells:,} cells, {len(table.index):,} non-zero, "
              f"n = {table.n_records:,}")
        fam = setting["family"]
        # the values the synthesis runs with, not rounded
        spread = ("" if fam == "poisson" else
                  f"{'theta' if fam == 'dpo' else 'sigma'} = {number_text(setting['sigma'])}, ")
        ones = int(np.sum(table.counts == 1))
        print(f"setting: {fam}, {spread}alpha = {number_text(setting['alpha'])}; expected tau_4(1) "
              f"= {tau.loc[1, 'tau4']:.4f} (a ratio of expected counts: synthetic ones from "
              f"real ones over all synthetic ones), tau_3(1) = {tau.loc[1, 'tau3']:.4f} (the "
              "chance that a real one stays one"
              + (")" if ones else "; no cell of this table has count 1)"))
    rng = np.random.default_rng(args.seed)
    items = []
    for path in outputs:
        syn = synthesize_table(table, **setting, random_seed=rng)
        frame = (table_to_microdata(syn, random_seed=rng) if args.microdata
                 else syn.to_frame(count=args.count or "count"))
        items.append((frame, path))
    _write_all(items, like=df, quiet=args.quiet)
    return 0


def _short_rule(rule) -> str:
    """Write a rule on one line as the schema JSON writes its values, ``lo..hi`` for a range."""
    from bayesynth.rules import _plain

    def text(v):
        return json.dumps(_plain(v))

    parts = []
    for col, levels in rule.when:
        vals = [_plain(v) for v in levels]
        whole = all(isinstance(v, int) and not isinstance(v, bool) for v in vals)
        if whole and len(vals) > 3 and vals == list(range(vals[0], vals[0] + len(vals))):
            parts.append(f"{col} in {vals[0]}..{vals[-1]}")
        else:
            parts.append(f"{col} in [{', '.join(text(v) for v in vals)}]")
    return f"{rule.column} == {text(rule.value)} if {' and '.join(parts)}"


def _few_valued_counts(df: pd.DataFrame, schema) -> list[tuple[str, int]]:
    """Count columns of at most ``FEW_VALUES`` distinct whole values, with how many each has.

    Such numbers can be codes of unordered categories (a tenure or marital status coded 1-5),
    which an inferred schema cannot tell from counts; a count is modelled as ordered.
    """
    from bayesynth.schema import FEW_VALUES

    out = []
    for c in schema.of_type("count"):
        x = df[c].dropna()
        if schema[c].special_codes:
            x = x[~x.isin(list(schema[c].special_codes))]
        k = int(x.nunique())
        if k <= FEW_VALUES:
            out.append((c, k))
    return out


def _inferred_schema_warning(df: pd.DataFrame, schema, source: str, show: int = 6) -> str | None:
    """Say what an inferred schema leaves to chance (None where nothing).

    Few whole values read as ordered counts, and relations it states no rule for.
    """
    counts = _few_valued_counts(df, schema)
    rules = schema.suggested_rules
    if not counts and not rules:
        return None
    said, fix = [], [f"bayesynth schema {shlex.quote(source)}"]
    if counts:
        listed = ", ".join(f"{c} ({k} values)" for c, k in counts)
        said.append(
            f"reads {listed} as counts, modelled as ordered numbers: if a column's numbers "
            "label unordered categories (a tenure or marital status coded 1-5), the model "
            "imposes an order they do not have")
        fix.append(f"--categorical {shlex.quote(','.join(c for c, _ in counts))}")
    if rules:
        listed = "; ".join(_short_rule(r) for r in rules[:show])
        more = f"; and {len(rules) - show} more" if len(rules) > show else ""
        said.append(
            f"states no rule, though the data hold {len(rules)} near-deterministic relations "
            f"that synthetic records will keep only approximately: {listed}{more}")
    keep = ", keeping in --categorical only the coded columns" if counts else ""
    move = ("move the relations you accept from \"suggested_rules\" to \"rules\", "
            if rules else "")
    return (f"the schema inferred from {source} {'; and it '.join(said)}. To fix this, write "
            f"the schema ({' '.join(fix)} > schema.json{keep}), {move}and pass --schema "
            "schema.json.")


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from bayesynth.schema import Schema, infer_schema, validate_data
    from bayesynth.synthesis import CopulaSynthesizer

    if args.m < 1:
        raise BayesynthError(f"--m must be at least 1; got {args.m}.")
    if args.cores is not None and args.cores < 1:
        raise BayesynthError(f"--cores must be at least 1; got {args.cores}.")
    if args.quiet:
        import logging

        logging.getLogger("pymc").setLevel(logging.WARNING)
        # which optional moves a table has no block for is detail; convergence warnings stay
        warnings.filterwarnings("ignore", message=r".* is not used \(", category=UserWarning)
    inputs = [Path(args.input)] + ([Path(args.schema)] if args.schema else [])
    outputs = output_paths(args.output, args.m)
    _check_outputs(inputs, outputs, args.overwrite)
    if args.save_model:
        _check_model_dir(Path(args.save_model), inputs + list(outputs), args.overwrite)
    df = read_table(args.input)
    if args.schema:
        schema = Schema.from_json(Path(args.schema))
        validate_data(df, schema)
    else:
        schema = infer_schema(df)
        said = _inferred_schema_warning(df, schema, args.input)
        if said:
            warnings.warn(said, UserWarning, stacklevel=2)
    syn = CopulaSynthesizer(
        schema,
        n_factors=args.n_factors,
        categorical=args.categorical,
        categorical_margins=args.categorical_margins,
        draws=args.draws,
        tune=args.tune if args.tune is not None else args.draws,
        chains=args.chains,
        max_extensions=args.max_extensions,
        cores=args.cores,
        random_seed=args.seed,
        progressbar=not args.quiet,
        targets=_split(args.targets),
        bart_m=args.bart_trees,
    )
    syn.fit(df)
    seed = None if args.seed is None else args.seed + 1
    frames = syn.sample(m=args.m, random_seed=seed)
    # all or nothing: the model first (its folder is replaced as a whole), then the tables;
    # if the tables cannot all be written, the saved model goes too
    if args.save_model:
        syn.save(args.save_model)
    try:
        _write_all(list(zip(frames, outputs)), like=df, schema=syn.schema_, quiet=args.quiet)
    except BaseException:
        if args.save_model:
            shutil.rmtree(args.save_model, ignore_errors=True)
        raise
    if args.save_model and not args.quiet:
        print(f"saved the fitted synthesizer to {args.save_model}")
    return 0


def _extended(idata) -> str:
    """Say how many times the chains were continued, if they were."""
    ext = int(idata.posterior.attrs.get("extensions", 0))
    if not ext:
        return ""
    return (f"; continued {ext} time(s) after failing the convergence check, "
            f"{idata.posterior.sizes['draw']} draws per chain kept")


def _cmd_demo(args: argparse.Namespace) -> int:
    from bayesynth.datasets import simulate_child_health
    from bayesynth.evaluation import ConvergenceSummary, crosstab_comparison, marginal_fidelity
    from bayesynth.synthesis import CopulaSynthesizer

    t0 = time.perf_counter()
    real = simulate_child_health(n=args.n, random_seed=args.seed)
    print(f"bayesynth demo: simulated child-health table, {real.shape[0]} rows x "
          f"{real.shape[1]} columns (2 categorical, 6 binary, 6 integer, 12 continuous)")
    syn = CopulaSynthesizer(draws=args.draws, tune=args.tune, chains=args.chains,
                            random_seed=args.seed, progressbar=not args.quiet)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        syn.fit(real)
    t_fit = time.perf_counter() - t0
    synth = syn.sample(m=args.m, random_seed=args.seed + 1)
    t_all = time.perf_counter() - t0
    print(f"\nfit: {syn.idata_.posterior.sizes['factor']} factors, "
          f"{len(syn.latent_names_)} latent columns, {args.chains} chains x {args.draws} draws "
          f"({args.tune} burn-in{_extended(syn.idata_)}) in {t_fit:.1f} s")
    if syn.convergence_table_ is None:
        print("convergence not judged: it needs at least two chains of four draws")
    else:
        conv = ConvergenceSummary.from_table(syn.convergence_table_)  # the fit's judgement
        print(f"convergence on what synthesis uses (correlations, associations of categorical "
              f"variables and conditional means, with the categorical margins calibrated to "
              f"the data as synthesis does): max R-hat {conv.max_rhat:.3f} "
              f"({100 * conv.share_rhat_above_1_01:.1f}% above 1.01), bulk ESS min "
              f"{conv.min_ess_bulk:.0f}, median {conv.median_ess_bulk:.0f}"
              + (f"; {conv.not_judged} not judged (see the note below)" if conv.not_judged
                 else ""))
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            print(f"note: {w.message}")
    fid = pd.concat([marginal_fidelity(real, s, syn.schema_) for s in synth]).groupby(
        level=0, sort=False).mean(numeric_only=True)
    fid["metric"] = ["ks" if syn.schema_[c].type in ("count", "continuous") else "tv"
                     for c in fid.index]
    print(f"\nmarginal fidelity over {args.m} synthetic dataset(s) "
          "(KS = max ECDF gap for numbers, TV = total variation for levels):")
    for metric in ("ks", "tv"):
        d = fid.loc[fid["metric"] == metric, "distance"]
        print(f"  {metric.upper()}: median {d.median():.3f}, worst {d.max():.3f} ({d.idxmax()})")
    _, diff = crosstab_comparison(real, synth[0], ["m_race", "m_educ"])
    print(f"cross-tab m_race x m_educ: largest cell difference {diff:.4f}")
    pairs = [("read", "math"), ("read", "ndi_birth"), ("mage", "read"), ("pm25_1yr", "ri_educ")]
    print("Spearman correlations, real vs synthetic:")
    for a, b in pairs:
        r = real[[a, b]].corr(method="spearman").iloc[0, 1]
        s = synth[0][[a, b]].corr(method="spearman").iloc[0, 1]
        print(f"  {a:>9} ~ {b:<9}  {r:+.3f}  {s:+.3f}")
    continuous = syn.schema_.of_type("continuous")
    copies = _copied_continuous(real, synth[0], continuous)
    # What chance gives at the data's precision: a second sample of the same population,
    # never used for fitting (the simulator with another seed), compared the same way.
    chance = _copied_continuous(real, simulate_child_health(n=args.n, random_seed=args.seed + 1),
                                continuous)
    print(f"continuous synthetic values equal to a real value: {copies:.2%}\n"
          f"  (values of an independent sample of the same population: {chance:.2%}; at the "
          "data's precision values repeat by chance: README, 'Point masses and integers')")
    if args.output:
        out = Path(args.output)
        # with the schema, as synthesize writes: each column at its precision, whole
        # values without a decimal point (79, not 79.0)
        _write_csv(real, out / "real.csv", schema=syn.schema_)
        for i, s in enumerate(synth, 1):
            _write_csv(s, out / f"synthetic_{i}.csv", schema=syn.schema_)
        syn.save(out / "model")
        print(f"\nwrote {out}/real.csv, synthetic_1..{args.m}.csv and the fitted model "
              f"({out}/model)")
    print(f"total {t_all:.1f} s")
    return 0


def _split(text: str | None) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()] if text else []


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from bayesynth.evaluation import report

    out = Path(args.output)
    if out.with_suffix(".json") == out:
        raise BayesynthError(f"-o '{out}': the report is HTML, and its JSON twin is written "
                             "beside it with the suffix .json; give an .html path.")
    inputs = [Path(args.real)] + [Path(p) for p in args.synthetic]
    if args.holdout is not None:
        inputs.append(Path(args.holdout))
    if args.ledger is not None:
        if not Path(args.ledger).is_file():
            raise InputTypeError(f"--ledger: no such file '{args.ledger}'.")
        inputs.append(Path(args.ledger))
    _check_outputs(inputs, [out, out.with_suffix(".json")], overwrite=True)
    real = read_table(args.real)
    syns = [read_table(p) for p in args.synthetic]
    holdout = read_table(args.holdout) if args.holdout else None
    res = report(
        real, syns, out,
        known=_split(args.known), synthesized=_split(args.synthesized),
        sensitive=args.sensitive, public=args.public, radius=args.radius,
        regression=args.regression, regression_method=args.regression_method,
        random_seed=args.seed, ledger=args.ledger, kind=args.kind, holdout=holdout,
    )
    print(f"wrote {out} and {out.with_suffix('.json')} ({res['kind']} synthetic data)")
    for item in res["at_a_glance"]:
        print(f"  {item['aspect']}: {item['sentence']}")
    prop = res["propensity"]
    spmse = ", ".join(f"{r['s_pmse']:.2f}" for r in prop)
    print(f"S_pMSE per dataset: {spmse}")
    if "identification_risk" in res:
        ir = res["identification_risk"]
        print(f"identification risk at {100 * args.radius:g}%: "
              f"{np.mean([r['risk'] for r in ir['per_dataset']]):.4g}; maximised at radius "
              f"{100 * ir['best_radius']:g}% ({ir['risk_at_best_radius']:.4g})")
    return 0


def _copied_continuous(real: pd.DataFrame, synth: pd.DataFrame, cols: Sequence[str]) -> float:
    """Share of ``synth``'s values equal to a value of the same column in ``real``.

    Averaged over ``cols`` (each column's share of its non-missing values); 0 without columns.
    """
    if not cols:
        return 0.0
    hits = [np.isin(synth[c].dropna().to_numpy(), real[c].dropna().to_numpy()).mean()
            for c in cols]
    return float(np.mean(hits))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bayesynth",
        description="Bayesian synthetic data with the rank-probit Gaussian copula.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("synthesize", help="fit the copula to a CSV file and write synthetic data")
    s.add_argument("input", help="input CSV file (confidential data)")
    s.add_argument("-o", "--output", required=True, help="output CSV (OUT_1.csv ... for --m > 1)")
    s.add_argument("--m", type=int, default=1, help="number of synthetic datasets (default 1)")
    s.add_argument("--schema", help="schema JSON (as printed by `bayesynth schema`); without "
                   "it the schema is inferred, and a warning lists the rules it suggests "
                   "(not applied) and the columns of at most 10 whole values it reads as "
                   "ordered counts")
    s.add_argument("--draws", type=int, default=1000, help="posterior draws per chain")
    s.add_argument("--tune", type=int, default=None, help="burn-in per chain (default: draws)")
    s.add_argument("--chains", type=int, default=2)
    s.add_argument("--max-extensions", type=int, default=2,
                   help="times to continue the chains for --draws more when the convergence "
                        "check fails with R-hat at most 1.1 (default 2; 0 samples exactly "
                        "--tune + --draws)")
    s.add_argument("--cores", type=int, default=None,
                   help="processes for the chains (default: one per chain, up to the CPU "
                        "count; 1 runs them one after the other in this process)")
    s.add_argument("--n-factors", type=int, default=None, help="number of factors")
    s.add_argument("--categorical", choices=("model", "empirical"), default="model",
                   help="how categorical combinations are drawn: from the model (default; not "
                        "copied from the real joint table) or the real joint frequencies")
    s.add_argument("--categorical-margins", choices=("data", "model"), default="data",
                   help="in model mode, each categorical variable's one-way frequencies: the "
                        "data's (default; the model gives the dependence) or the model's")
    s.add_argument("--targets", help="comma-separated key outcomes to synthesise with BART "
                   "rank regressions (Feldman & Kowal, section 5)")
    s.add_argument("--bart-trees", type=int, default=200, help="trees per BART target")
    s.add_argument("--seed", type=int, default=None, help="random seed (reproducible output)")
    s.add_argument("--save-model", help="also save the fitted synthesizer to this directory "
                   "(created; an existing one is replaced only with --overwrite)")
    s.add_argument("--overwrite", action="store_true", help="replace existing output files")
    s.add_argument("--quiet", action="store_true",
                   help="no progress bars or messages (warnings that the chains have not "
                        "converged still print)")
    s.set_defaults(func=_cmd_synthesize)

    c = sub.add_parser("schema", help="print the inferred schema of a CSV file as JSON")
    c.add_argument("input", help="input CSV file; the schema JSON goes to standard output")
    for typ in _TYPE_OPTIONS:
        c.add_argument(f"--{typ}", metavar="COLUMNS",
                       help=f"comma-separated columns to read as {typ} (overriding "
                            "inference; a name with a comma needs the Python API)")
    c.add_argument("--special-codes", action="append", metavar="COLUMN=CODES",
                   help="a numeric column's special codes, such as nofriend=-8 or "
                        "income=-8,-9, read as codes however few records hold them "
                        "(nofriend= reads its negative values as numbers); repeatable")
    c.set_defaults(func=_cmd_schema)

    e = sub.add_parser("evaluate", help="utility and disclosure-risk report (HTML + JSON)")
    e.add_argument("real", help="real data CSV")
    e.add_argument("synthetic", nargs="+", help="one or more synthetic CSV files")
    e.add_argument("-o", "--output", default="report.html", help="HTML report path")
    e.add_argument("--known", help="comma-separated unsynthesized variables an intruder knows")
    e.add_argument("--synthesized", "--synthesised", dest="synthesized",
                   help="comma-separated synthesized variables (identification risk)")
    e.add_argument("--sensitive", help="sensitive variable (attribute disclosure)")
    e.add_argument("--public", help="public variable whose outliers are examined")
    e.add_argument("--radius", type=float, default=0.05,
                   help="matching radius as a share of the value (default 0.05)")
    e.add_argument("--regression", help='formula, e.g. "y ~ x1 + x2 + x1:x2"')
    e.add_argument("--regression-method", choices=("ols", "bayes"), default="ols")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--ledger", help="privacy ledger JSON of the release (shown in the report)")
    e.add_argument("--kind", choices=("auto", "fully", "partially"), default="auto",
                   help="fully or partially synthetic data (default: inferred)")
    e.add_argument("--holdout", help="CSV of real records the synthesizer did not see "
                                     "(DCR ratio and singling-out risk of fully synthetic data)")
    e.set_defaults(func=_cmd_evaluate)

    t = sub.add_parser("saturate", help="saturated count synthesis of a categorical table "
                       "(Jackson et al.)")
    t.add_argument("input", help="input CSV: records, or one row per cell with --count")
    t.add_argument("-o", "--output", required=True, help="output CSV (OUT_1.csv ... for --m > 1)")
    t.add_argument("--variables", help="comma-separated variables (default: all but --count)")
    t.add_argument("--count", help="column of cell counts (input and output)")
    t.add_argument("--family", choices=("poisson", "nbi", "pig", "dpo"), default=None,
                   help="count family (default nbi)")
    t.add_argument("--sigma", type=float, default=None,
                   help="dispersion (nbi, pig) or precision theta (dpo); default 0.1 (the "
                        "Poisson has none)")
    t.add_argument("--alpha", type=float, default=None,
                   help="pseudocount of random zeros; default 0")
    t.add_argument("--max-risk", type=float, default=None,
                   help="choose family, sigma and alpha so that expected tau_4(1), a ratio of "
                        "expected counts, is at most this (not with --family, --sigma or "
                        "--alpha)")
    t.add_argument("--m", type=int, default=1, help="number of synthetic tables (default 1)")
    t.add_argument("--microdata", action="store_true",
                   help="write one row per synthetic record instead of cells and counts")
    t.add_argument("--seed", type=int, default=None, help="random seed (reproducible output)")
    t.add_argument("--overwrite", action="store_true", help="replace existing output files")
    t.add_argument("--quiet", action="store_true")
    t.set_defaults(func=_cmd_saturate)

    d = sub.add_parser("demo", help="run the whole job on the embedded child-health data")
    d.add_argument("--n", type=int, default=2000, help="records to simulate (default 2000)")
    d.add_argument("--draws", type=int, default=4000)
    d.add_argument("--tune", type=int, default=2000)
    d.add_argument("--chains", type=int, default=2)
    d.add_argument("--m", type=int, default=5, help="synthetic datasets (default 5)")
    d.add_argument("--seed", type=int, default=2026)
    d.add_argument("--output", default="demo_output",
                   help="folder for real.csv, synthetic_*.csv and the model ('' for none)")
    d.add_argument("--quiet", action="store_true")
    d.set_defaults(func=_cmd_demo)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning as a command-line user reads it: what, not where in our code."""
    kind = "" if category in (UserWarning, RuntimeWarning) else f" ({category.__name__})"
    print(f"bayesynth: warning{kind}: {message}", file=file or sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``bayesynth`` console script.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments without the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a :class:`~bayesynth.errors.BayesynthError` (printed
        to stderr), 128 + the signal number for a run stopped by a signal (130 for Ctrl-C).
    """
    from bayesynth._signals import RunStopped, stop_on_signals

    args = _parser().parse_args(argv)
    try:
        with stop_on_signals(), warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args))
    except BayesynthError as err:
        print(f"bayesynth: error: {err}", file=sys.stderr)
        return 2
    except (RunStopped, KeyboardInterrupt) as stop:
        code = stop.exit_code if isinstance(stop, RunStopped) else 130
        print(f"bayesynth: {stop or 'interrupted'}: the run was stopped before it finished; "
              "its worker processes have ended and no output file was written.",
              file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

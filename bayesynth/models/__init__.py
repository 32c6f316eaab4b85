"""Model factories: each returns a :class:`pymc.Model` with named coords and dims.

The contingency-table types that :func:`saturated_count_model` takes are defined in
:mod:`bayesynth.tables` and re-exported here; the analytic tau metrics of a saturated count
synthesis (``expected_tau``, ``expected_within``) are risk measures, in
:mod:`bayesynth.evaluation`.
"""

from bayesynth.models import pseudo_posterior
from bayesynth.models.bart_rank import bart_rank_regression
from bayesynth.models.latent_class_dp import latent_class_dp_model
from bayesynth.models.layout import LatentLayout
from bayesynth.models.rank_probit_copula import (
    choose_n_factors,
    get_layout,
    rank_probit_copula,
)
from bayesynth.models.saturated_counts import saturated_count_model
from bayesynth.tables import (
    SparseTable,
    StructuralZeros,
    microdata_to_table,
    table_to_microdata,
)

__all__ = [
    "latent_class_dp_model",
    "pseudo_posterior",
    "rank_probit_copula",
    "bart_rank_regression",
    "LatentLayout",
    "get_layout",
    "choose_n_factors",
    "saturated_count_model",
    "SparseTable",
    "StructuralZeros",
    "microdata_to_table",
    "table_to_microdata",
]

"""Model factories: each returns a :class:`pymc.Model` with named coords and dims."""

from bayesynth.models import pseudo_posterior
from bayesynth.models.bart_rank import BartDesign, bart_rank_regression
from bayesynth.models.latent_class_dp import latent_class_dp_model
from bayesynth.models.layout import LatentLayout
from bayesynth.models.rank_probit_copula import (
    RankProbitConstraint,
    choose_n_factors,
    get_layout,
    rank_probit_copula,
)
from bayesynth.models.saturated_counts import (
    SparseTable,
    StructuralZeros,
    expected_tau,
    expected_within,
    microdata_to_table,
    saturated_count_model,
    table_to_microdata,
)

__all__ = [
    "latent_class_dp_model",
    "pseudo_posterior",
    "rank_probit_copula",
    "bart_rank_regression",
    "BartDesign",
    "RankProbitConstraint",
    "LatentLayout",
    "get_layout",
    "choose_n_factors",
    "saturated_count_model",
    "SparseTable",
    "StructuralZeros",
    "microdata_to_table",
    "table_to_microdata",
    "expected_tau",
    "expected_within",
]

"""Differential privacy in bayesynth: mechanisms, one neighbour vocabulary, and a ledger.

This package sits at the start of the data flow for formally private releases.

* :mod:`~bayesynth.privacy.neighbours`: the neighbour relations (``"change_one"``, the default
  everywhere, and ``"add_remove"``), epsilon validation, sensitivities, censoring bounds and the
  seed policy of releases.
* :mod:`~bayesynth.privacy.geometric`: the geometric mechanism, sampled exactly with integers.
* :mod:`~bayesynth.privacy.marginals`: noisy marginal tables, the PrivBayes selection and the
  budget split.
* :mod:`~bayesynth.privacy.ledger`: every release, what it cost and why, composed.
* :mod:`~bayesynth.privacy.lipschitz`: record weights, Lipschitz bounds of the pseudo-posterior
  mechanisms and the epsilon a bound implies.

The pseudo-posterior mechanisms (:class:`bayesynth.synthesis.PseudoPosteriorSynthesizer`) and
the perturbed histogram record into the same :class:`Ledger`.
"""

from bayesynth.privacy.geometric import (
    geometric_logpmf,
    geometric_mechanism,
    geometric_noise,
    privacy_loss,
)
from bayesynth.privacy.ledger import GUARANTEES, Ledger, LedgerEntry
from bayesynth.privacy.lipschitz import (
    censored_share,
    lipschitz_bound,
    local_epsilon,
    privacy_weights,
)
from bayesynth.privacy.marginals import (
    NoisyMarginal,
    PrivateMarginals,
    mi_sensitivity,
    privatize_marginals,
    select_marginals,
    selection_probabilities,
    table_domain,
    true_marginal,
)
from bayesynth.privacy.neighbours import (
    NEIGHBOURS,
    censor_bound,
    check_epsilon,
    check_neighbours,
    histogram_sensitivity,
    release_rng,
)

__all__ = [
    "NEIGHBOURS",
    "GUARANTEES",
    "check_neighbours",
    "check_epsilon",
    "histogram_sensitivity",
    "censor_bound",
    "release_rng",
    "geometric_mechanism",
    "geometric_noise",
    "geometric_logpmf",
    "privacy_loss",
    "privacy_weights",
    "lipschitz_bound",
    "local_epsilon",
    "censored_share",
    "Ledger",
    "LedgerEntry",
    "NoisyMarginal",
    "PrivateMarginals",
    "privatize_marginals",
    "select_marginals",
    "selection_probabilities",
    "mi_sensitivity",
    "table_domain",
    "true_marginal",
]

"""An example signal for ``ragcal try-signal examples/dense_lift.py``: how far the best chunk stands out.

``dense_lift`` is the cosine of the best chunk minus the mean cosine of ranks 2 to 10 (notebook 04's signal). A
question the docs cover should have one clearly best passage; an off-topic question gets a flat list of weak
matches. One function and one registration: the command computes it beside ``dense_top1`` on every dataset.
"""

from ragcal.signals import register_signal


@register_signal("dense_lift", retrievers=("dense",), replace=True)
def dense_lift(results):
    """Cosine of the best chunk minus the mean cosine of ranks 2 to 10."""
    scores = results["dense"].scores
    return float(scores[0] - scores[1:10].mean())

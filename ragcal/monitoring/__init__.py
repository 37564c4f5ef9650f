"""After deployment: review samples of a live score log and what their labels say (:mod:`ragcal.monitoring.review`)."""

from .review import (
    ReviewEstimates,
    attach_passages,
    bar_distances,
    read_review_labels,
    refit_with_labels,
    review_estimates,
    review_sample,
    stratified_share,
    write_review_csv,
)

__all__ = [
    "ReviewEstimates",
    "attach_passages",
    "bar_distances",
    "read_review_labels",
    "refit_with_labels",
    "review_estimates",
    "review_sample",
    "stratified_share",
    "write_review_csv",
]

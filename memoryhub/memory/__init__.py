"""The memory domain: source events, summary versions, validation, quality scoring, the lifecycle
(compare-and-swap activation) and observed compactions."""

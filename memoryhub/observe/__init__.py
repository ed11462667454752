"""Reports over the domain: the metrics registry, overview reports, charts and alerting."""

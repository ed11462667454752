"""REST API v1 (DRF). One module per feature area; memoryhub/api/urls.py collects them."""
